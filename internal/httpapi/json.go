package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// maxBody is the largest request body accepted.
const maxBody = 64 << 10

// decode reads the request body into v strictly: one JSON object, no unknown
// fields, nothing after it, at most maxBody bytes. An empty body is allowed
// when allowEmpty (it decodes as {}).
func decode(w http.ResponseWriter, r *http.Request, v any, allowEmpty bool) error {
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	return decodeBody(body, v, allowEmpty)
}

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, badRequest(fmt.Sprintf("request body is larger than %d bytes", maxBody))
	case err != nil:
		return nil, badRequest("could not read request body")
	}
	return body, nil
}

func decodeBody(body []byte, v any, allowEmpty bool) error {
	// Only JSON's own whitespace: bytes.TrimSpace would also drop Unicode
	// spaces such as U+00A0, which make a body invalid JSON.
	trimmed := bytes.Trim(body, " \t\r\n")
	if len(trimmed) == 0 && allowEmpty {
		return nil
	}
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return badRequest("request body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest(describeJSONError(err))
	}
	// Nothing may follow the object. dec.More alone is not enough: it reports
	// a following '}' or ']' as "no more", so `{...}}` would pass.
	if dec.InputOffset() != int64(len(trimmed)) {
		return badRequest("request body must hold a single JSON object")
	}
	return nil
}

func describeJSONError(err error) string {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field != "" {
		return fmt.Sprintf("%s: must be a JSON %s", typeErr.Field, typeErr.Type.Kind())
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "json: unknown field ") {
		return "unknown field " + strings.TrimPrefix(msg, "json: unknown field ")
	}
	return "malformed JSON: " + strings.TrimPrefix(msg, "json: ")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

const timestampLayout = "2006-01-02T15:04:05.000Z07:00"

// Timestamp is an instant in UTC with millisecond precision, as the API
// reports every time.
type Timestamp time.Time

// MarshalJSON writes e.g. "2026-11-22T10:00:00.000Z".
func (t Timestamp) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Time(t).UTC().Format(timestampLayout) + `"`), nil
}
