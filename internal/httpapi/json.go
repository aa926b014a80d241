package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"redpacket/internal/envelope"
)

// maxBody is the largest request body accepted, but for a create's.
// readBody makes room for the length a body declares, up to its limit: a
// small one keeps a slow client declaring a large body from holding more.
const maxBody = 64 << 10

// maxCreateBody is the largest create body accepted: room for the largest
// create the limits allow (1,000 recipients of 64 characters, 67 KB; 20
// metadata values of 500 characters, each a \u escape pair, 121 KB; the
// rest).
const maxCreateBody = 256 << 10

// decode reads the request body into v strictly: one JSON object of at most
// maxBody bytes, each member a field of v spelled exactly as its tag, none
// given twice, nothing after it. An empty body is allowed when allowEmpty
// (it decodes as {}).
func decode(w http.ResponseWriter, r *http.Request, v any, allowEmpty bool) error {
	body, err := readBody(w, r, maxBody)
	if err != nil {
		return err
	}
	return decodeBody(body, v, allowEmpty)
}

// readBody reads a request body of at most limit bytes.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if n := r.ContentLength; n >= 0 && n <= limit {
		return readBodyInto(r, make([]byte, 0, n+1))
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, bodyTooLargeErr(limit)
	case err != nil:
		return nil, badRequest("could not read request body")
	}
	return body, nil
}

// readBodyInto reads a body of a known length, no larger than its limit, into
// buf's room (at least its length plus one, so that the read that finds the
// end needs no more), without http.MaxBytesReader and the growing buffer of
// io.ReadAll: the server's body reader stops at the length it declared.
func readBodyInto(r *http.Request, buf []byte) ([]byte, error) {
	for {
		n, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch {
		case err == io.EOF:
			return buf, nil
		case err != nil:
			return nil, badRequest("could not read request body")
		case len(buf) == cap(buf): // more than declared: not a body net/http gives
			return nil, badRequest("could not read request body")
		}
	}
}

// strict are the decoder's options besides its defaults, which already
// refuse a member name given twice (also when spelled with escapes), match
// names exactly (no case folding, ASCII or Unicode: "USER_ID" and
// "\u017fender_id" are not fields), and refuse invalid UTF-8 and anything
// but whitespace after the object. encoding/json does none of these: another
// parser reading the same body (a gateway, the campaign backend) could see
// other values than the service.
//
// strictNullCheck adds a rule of the API's own: no member, nor any value
// inside one (a metadata value, a recipient), is JSON null, but those of
// nullableMembers. The decoder would read null as the field's zero value,
// so "password":null or "recipients":null would create an envelope without
// its password or its recipients, where a parser that keeps nulls, or a
// gateway holding bodies to the contract (which types no other field as
// nullable), sees a request to refuse. Its unmarshalers cost a call before
// every value, so only a body holding the bytes "null" is read with them:
// a null is spelled so (in a string they may be text; the unmarshalers then
// find nothing), and bytes.Contains looks at a grab's few bytes in
// nanoseconds where the calls take tens.
var (
	strict          = jsonv2.RejectUnknownMembers(true)
	strictNullCheck = jsonv2.JoinOptions(strict, jsonv2.WithUnmarshalers(nullRefused))
	nullToken       = []byte("null")
)

// nullRefused refuses a null for every type a request body's field, or a
// value inside one, has (handlers.go); TestContractFieldsRefuseNull finds a
// field whose type is missing. One function per concrete type, not one
// taking any: the decoder converts each value to an interface for that,
// allocating.
var nullRefused = jsonv2.JoinUnmarshalers(
	refuseNull[string](), refuseNull[int64](), refuseNull[envelope.Kind](),
	refuseNull[[]string](), refuseNull[map[string]string](),
	refuseNull[*string](), refuseNull[*int64](), refuseNull[*envelope.Kind](),
)

// nullableMembers are the members whose null the API documents as meaning
// the default, as leaving them out does.
var nullableMembers = map[jsontext.Pointer]bool{"/expires_in_seconds": true}

// errNull is the cause of a refused null.
var errNull = errors.New("null is not allowed")

// refuseNull returns the unmarshaler called before a value of type T is
// decoded. It refuses a null, reporting the Go type it would have gone
// into; any other value it leaves to the decoder (errors.ErrUnsupported:
// skip), reading nothing and allocating nothing.
func refuseNull[T any]() *jsonv2.Unmarshalers {
	return jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, _ *T) error {
		if dec.PeekKind() != 'n' || nullableMembers[dec.StackPointer()] {
			return errors.ErrUnsupported
		}
		return &jsonv2.SemanticError{JSONKind: 'n', GoType: reflect.TypeFor[T](), Err: errNull}
	})
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
	opts := strict
	if bytes.Contains(trimmed, nullToken) {
		opts = strictNullCheck
	}
	if err := jsonv2.Unmarshal(trimmed, v, opts); err != nil {
		return badRequest(describeJSONError(err))
	}
	return nil
}

// describeJSONError names the field at fault where there is one.
func describeJSONError(err error) string {
	var syn *jsontext.SyntacticError
	var sem *jsonv2.SemanticError
	switch {
	case errors.As(err, &syn) && errors.Is(err, jsontext.ErrDuplicateName):
		return where(syn.JSONPointer) + "given more than once"
	case errors.As(err, &syn):
		return fmt.Sprintf("malformed JSON: %v (at byte %d)", syn.Err, syn.ByteOffset)
	case errors.As(err, &sem) && errors.Is(err, jsonv2.ErrUnknownName):
		return "unknown field " + strconv.Quote(sem.JSONPointer.LastToken())
	case errors.As(err, &sem) && errors.Is(err, errNull) && sem.GoType != nil:
		return where(sem.JSONPointer) + "must be " + jsonKind(sem.GoType) + ", not null"
	case errors.As(err, &sem) && sem.JSONPointer != "" && sem.GoType != nil:
		return where(sem.JSONPointer) + "must be " + jsonKind(sem.GoType)
	}
	return "request body does not match the request's fields"
}

// where begins a message about the value a JSON pointer points at with the
// request's field that holds it: "total_cents: " for "/total_cents", and
// for a value inside a field (a metadata value, a recipient) the field and
// the pointer, "metadata: /metadata/k ".
func where(p jsontext.Pointer) string {
	for field := range p.Tokens() {
		if p.Parent() == "" {
			return field + ": "
		}
		return field + ": " + string(p) + " "
	}
	return ""
}

// jsonKind is what a field of type t holds, as the API document says it.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a JSON string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a JSON number, a whole one in range"
	case reflect.Struct, reflect.Map:
		return "a JSON object"
	case reflect.Slice, reflect.Array:
		return "a JSON array"
	}
	return "a JSON " + t.Kind().String()
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
