package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// client is the one HTTP client every virtual user shares. Its transport keeps
// an idle connection per user, so after the first round every grab reuses a
// kept-alive connection and the tool does not spend its time dialing.
type client struct {
	http *http.Client
	base string
	auth string // the Authorization header value, or ""
}

func newClient(c Config) *client {
	tr := &http.Transport{
		Proxy:               nil, // the target is addressed directly, whatever the environment says
		DialContext:         (&net.Dialer{Timeout: c.Timeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        c.Users + 16,
		MaxIdleConnsPerHost: c.Users + 16,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true, // the answers are small; gzip would only cost CPU on both sides
		ForceAttemptHTTP2:   false,
	}
	cl := &client{http: &http.Client{Transport: tr, Timeout: c.Timeout}, base: strings.TrimRight(c.URL, "/")}
	if c.Token != "" {
		cl.auth = "Bearer " + c.Token
	}
	return cl
}

func (c *client) close() { c.http.CloseIdleConnections() }

func (c *client) grabURL(envelopeID int64) string {
	return c.base + "/v1/envelopes/" + strconv.FormatInt(envelopeID, 10) + "/grab"
}

type createRequest struct {
	SenderID         string `json:"sender_id"`
	TotalCents       int64  `json:"total_cents"`
	Count            int    `json:"count"`
	ExpiresInSeconds int64  `json:"expires_in_seconds"`
}

type created struct {
	EnvelopeID int64  `json:"envelope_id"`
	TotalCents int64  `json:"total_cents"`
	Count      int    `json:"count"`
	Status     string `json:"status"`
}

// create makes one envelope. Creating is not what the tool measures, so it
// has its own, longer timeout: a 100,000-packet envelope takes a while.
func (c *client) create(ctx context.Context, req createRequest) (created, error) {
	var out created
	body, err := json.Marshal(req)
	if err != nil {
		return out, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/envelopes", bytes.NewReader(body))
	if err != nil {
		return out, fmt.Errorf("create envelope: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	if c.auth != "" {
		hr.Header.Set("Authorization", c.auth)
	}
	resp, err := (&http.Client{Transport: c.http.Transport}).Do(hr)
	if err != nil {
		return out, fmt.Errorf("create envelope: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return out, fmt.Errorf("create envelope: read answer: %w", err)
	}
	if resp.StatusCode != http.StatusCreated {
		return out, fmt.Errorf("create envelope: %s: %s", resp.Status, bytes.TrimSpace(data))
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return out, fmt.Errorf("create envelope: decode %q: %w", data, err)
	}
	return out, nil
}

// answer is a grab's answer: the packet on 200, the error code otherwise.
type answer struct {
	status      int
	EnvelopeID  int64  `json:"envelope_id"`
	PacketID    int64  `json:"packet_id"`
	AmountCents int64  `json:"amount_cents"`
	OrderNo     string `json:"order_no"`
	Repeat      bool   `json:"repeat"`
	Error       struct {
		Code string `json:"code"`
	} `json:"error"`
}

// grabber sends one virtual user's grabs. It is not safe for concurrent use:
// its buffers and header are reused from one grab to the next, so the request
// path allocates little beyond what net/http itself does.
type grabber struct {
	c    *client
	hdr  http.Header
	body []byte
	rd   bytes.Reader
	resp bytes.Buffer
}

func newGrabber(c *client) *grabber {
	g := &grabber{c: c, hdr: http.Header{"Content-Type": {"application/json"}}, body: make([]byte, 0, 128)}
	if c.auth != "" {
		g.hdr["Authorization"] = []string{c.auth}
	}
	g.resp.Grow(512)
	return g
}

// grab posts {"user_id": user} to url and decodes the answer into a. User ids
// are made by the tool from JSON-safe characters, so the body needs no escaping.
func (g *grabber) grab(url, user string, a *answer) error {
	g.body = append(append(append(g.body[:0], `{"user_id":"`...), user...), `"}`...)
	g.rd.Reset(g.body)
	req, err := http.NewRequest(http.MethodPost, url, &g.rd)
	if err != nil {
		return err
	}
	req.Header = g.hdr // read-only for the transport; the previous request is done with it
	req.ContentLength = int64(len(g.body))
	resp, err := g.c.http.Do(req)
	if err != nil {
		return err
	}
	g.resp.Reset()
	_, err = g.resp.ReadFrom(resp.Body)
	resp.Body.Close()
	if err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	*a = answer{status: resp.StatusCode}
	if err := json.Unmarshal(g.resp.Bytes(), a); err != nil {
		// Counted as an answer of its own kind (and as an error), not
		// mistaken for a packet or a transport failure.
		*a = answer{status: resp.StatusCode}
		a.Error.Code = codeUndecodable
	}
	return nil
}

// codeUndecodable stands for the error code of an answer that is not the
// API's JSON (a proxy's error page, say).
const codeUndecodable = "(not API JSON)"
