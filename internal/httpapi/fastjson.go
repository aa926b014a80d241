package httpapi

import (
	"bytes"
	"net/http"
	"strconv"
	"sync"
	"time"

	"redpacket/internal/envelope"
)

// The grab is the hot request: its body and answer are read and written
// here without reflection. Only the exact shapes below take the short way;
// anything else goes through the strict decoder, so what is accepted and
// every error message stay the same.

var grabPrefix, grabSuffix = []byte(`{"user_id":"`), []byte(`"}`)

// decodeGrab reads a grab request body. One with a password takes the
// strict decoder's way.
func decodeGrab(w http.ResponseWriter, r *http.Request) (grabRequest, error) {
	body, err := readBody(w, r, maxBody)
	if err != nil {
		return grabRequest{}, err
	}
	if user, ok := plainGrab(body); ok {
		return grabRequest{UserID: user}, nil
	}
	var req grabRequest
	if err := decodeBody(body, &req, false); err != nil {
		return grabRequest{}, err
	}
	return req, nil
}

// plainGrab reads {"user_id":"<id>"} where the id holds only characters a
// user id may hold (none needs escaping in JSON), as every client sends it.
func plainGrab(body []byte) (string, bool) {
	if !bytes.HasPrefix(body, grabPrefix) || !bytes.HasSuffix(body, grabSuffix) ||
		len(body) < len(grabPrefix)+len(grabSuffix) {
		return "", false
	}
	id := body[len(grabPrefix) : len(body)-len(grabSuffix)]
	for _, c := range id {
		if !envelope.IsIDByte(c) {
			return "", false
		}
	}
	return string(id), true
}

// grabAnswers are the buffers answers are written from: the writer copies
// what it is given (an io.Writer keeps nothing), so one serves again.
var grabAnswers = sync.Pool{New: func() any { return new([256]byte) }}

// jsonContentType is the Content-Type of a grab's answer, one slice for
// every answer: the server copies the header values it sends (Header.Clone),
// and nothing writes into a header's values in place.
var jsonContentType = []string{"application/json"}

// writeGrab writes a grab's answer exactly as writeJSON would.
func writeGrab(w http.ResponseWriter, g grabResponse) {
	buf := grabAnswers.Get().(*[256]byte)
	defer grabAnswers.Put(buf)
	b := buf[:0]
	b = append(b, `{"envelope_id":`...)
	b = strconv.AppendInt(b, g.EnvelopeID, 10)
	b = append(b, `,"packet_id":`...)
	b = strconv.AppendInt(b, g.PacketID, 10)
	b = append(b, `,"amount_cents":`...)
	b = strconv.AppendInt(b, g.AmountCents, 10)
	b = append(b, `,"order_no":`...)
	if g.OrderNo == "" {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendQuote(b, string(g.OrderNo)) // digits: quoted alike by both
	}
	b = append(b, `,"grabbed_at":"`...)
	b = appendTimestamp(b, time.Time(g.GrabbedAt))
	b = append(b, `","repeat":`...)
	b = strconv.AppendBool(b, g.Repeat)
	b = append(b, "}\n"...)
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// appendTimestamp appends t as Timestamp writes it (timestampLayout, in
// UTC) without reading the layout: "2026-11-22T10:00:00.123Z", the
// milliseconds truncated as AppendFormat truncates them. A year outside
// 0-9999 is left to AppendFormat.
func appendTimestamp(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(b, timestampLayout)
	}
	hour, minute, sec := t.Clock()
	b = appendDigits(b, year, 4)
	b = append(b, '-')
	b = appendDigits(b, int(month), 2)
	b = append(b, '-')
	b = appendDigits(b, day, 2)
	b = append(b, 'T')
	b = appendDigits(b, hour, 2)
	b = append(b, ':')
	b = appendDigits(b, minute, 2)
	b = append(b, ':')
	b = appendDigits(b, sec, 2)
	b = append(b, '.')
	b = appendDigits(b, t.Nanosecond()/1e6, 3)
	return append(b, 'Z')
}

// appendDigits appends the n (at most 4) lowest decimal digits of v >= 0,
// zero-padded.
func appendDigits(b []byte, v, n int) []byte {
	var d [4]byte
	for i := n - 1; i >= 0; i-- {
		d[i] = byte('0' + v%10)
		v /= 10
	}
	return append(b, d[:n]...)
}
