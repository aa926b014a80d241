package httpapi

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"redpacket/internal/events"
)

// EventFeed reads the events the flusher wrote (events.Feed).
type EventFeed interface {
	Read(ctx context.Context, after int64, limit int, wait time.Duration) (events.Page, error)
}

// The parameters of GET /v1/events.
const (
	eventsLimitDefault = 100
	eventsLimitMax     = 1000
	eventsWaitMax      = 30 // seconds

	// longPollAnswerTime is how long a long poll's answer may take once
	// its wait is over: the daemons' write timeout for any answer.
	longPollAnswerTime = 30 * time.Second
)

type eventsResponse struct {
	Events    []events.Message `json:"events"`
	NextAfter int64            `json:"next_after"`
}

type eventsQuery struct {
	after int64
	limit int
	wait  time.Duration
}

// events serves GET /v1/events?after=&limit=&wait=.
func (a *API) events(feed EventFeed) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if feed == nil {
			a.writeError(w, r, errFeedNotServed)
			return
		}
		v, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			a.writeError(w, r, badRequest("malformed query string: "+err.Error()))
			return
		}
		q, err := parseEventsQuery(v)
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		if q.wait > 0 {
			// The server's write timeout counts from the end of the
			// request's header, and a long poll answers only after its
			// wait: its deadline moves past the wait. Not every writer
			// can (a test's recorder): then it stays as it is.
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(q.wait + longPollAnswerTime))
		}
		p, err := feed.Read(r.Context(), q.after, q.limit, q.wait)
		if err != nil {
			if r.Context().Err() != nil {
				return // the client went away while waiting: nobody to answer
			}
			a.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, eventsResponse{Events: p.Events, NextAfter: p.NextAfter})
	}
}

// parseEventsQuery reads the query strictly: known parameters, each at most
// once, each a decimal integer in its range.
func parseEventsQuery(v url.Values) (eventsQuery, error) {
	q := eventsQuery{limit: eventsLimitDefault}
	for name, vals := range v {
		if name != "after" && name != "limit" && name != "wait" {
			return q, badRequest("unknown parameter " + strconv.Quote(name) + "; use after, limit and wait")
		}
		if len(vals) > 1 {
			return q, badRequest(name + ": given more than once")
		}
	}
	var err error
	if q.after, err = intParam(v, "after", 0, 0, 1<<53-1); err != nil {
		return q, err
	}
	limit, err := intParam(v, "limit", eventsLimitDefault, 1, eventsLimitMax)
	if err != nil {
		return q, err
	}
	wait, err := intParam(v, "wait", 0, 0, eventsWaitMax)
	if err != nil {
		return q, err
	}
	q.limit, q.wait = int(limit), time.Duration(wait)*time.Second
	return q, nil
}

// intParam reads a parameter of digits only, between lo and hi; def when
// it is absent.
func intParam(v url.Values, name string, def, lo, hi int64) (int64, error) {
	if _, ok := v[name]; !ok {
		return def, nil
	}
	s := v.Get(name)
	bad := badRequest(name + ": must be an integer from " + strconv.FormatInt(lo, 10) + " to " + strconv.FormatInt(hi, 10))
	if s == "" || len(s) > 16 {
		return 0, bad
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, bad
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, bad
	}
	return n, nil
}
