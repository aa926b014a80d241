package httpapi

import (
	"bytes"
	"net/http"
	"strconv"
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
	body, err := readBody(w, r)
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

// writeGrab writes a grab's answer exactly as writeJSON would.
func writeGrab(w http.ResponseWriter, g grabResponse) {
	b := make([]byte, 0, 192)
	b = append(b, `{"envelope_id":`...)
	b = strconv.AppendInt(b, g.EnvelopeID, 10)
	b = append(b, `,"packet_id":`...)
	b = strconv.AppendInt(b, g.PacketID, 10)
	b = append(b, `,"amount_cents":`...)
	b = strconv.AppendInt(b, g.AmountCents, 10)
	b = append(b, `,"order_no":`...)
	b = strconv.AppendQuote(b, g.OrderNo) // digits: quoted alike by both
	b = append(b, `,"grabbed_at":"`...)
	b = time.Time(g.GrabbedAt).UTC().AppendFormat(b, timestampLayout)
	b = append(b, `","repeat":`...)
	b = strconv.AppendBool(b, g.Repeat)
	b = append(b, "}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}
