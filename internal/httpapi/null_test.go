package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// A member given as JSON null is refused, naming the field, wherever it is:
// the decoder would read it as the field's zero value, so a client bug
// sending "password":null or "recipients":null would create an envelope
// anyone may grab, and a grab's "password":null would be read as no
// password. The contract types no request field but expires_in_seconds as
// nullable.

// nullCreates are create bodies with a null somewhere, each with the field
// its message must name.
var nullCreates = []struct{ name, body, field string }{
	{"sender_id", `{"sender_id":null,"total_cents":100,"count":1}`, "sender_id"},
	{"total_cents", `{"sender_id":"u-1","total_cents":null,"count":1}`, "total_cents"},
	{"count", `{"sender_id":"u-1","total_cents":100,"count":null}`, "count"},
	{"kind", `{` + validCreate + `,"kind":null}`, "kind"},
	{"recipients", `{` + validCreate + `,"recipients":null}`, "recipients"},
	{"password", `{` + validCreate + `,"password":null}`, "password"},
	{"greeting", `{` + validCreate + `,"greeting":null}`, "greeting"},
	{"metadata", `{` + validCreate + `,"metadata":null}`, "metadata"},
	{"starts_at", `{` + validCreate + `,"starts_at":null}`, "starts_at"},
	{"password first", `{"password":null,` + validCreate + `}`, "password"},
	{"password with spaces", `{ "sender_id": "u-1", "total_cents": 100, "count": 10, "password" : null }`, "password"},
	{"a metadata value", `{` + validCreate + `,"metadata":{"k":null}}`, "metadata"},
	{"a metadata value after another", `{` + validCreate + `,"metadata":{"a":"x","k":null}}`, "metadata"},
	{"a metadata value named like a nullable field", `{` + validCreate + `,"metadata":{"expires_in_seconds":null}}`, "metadata"},
	{"a recipient", `{"sender_id":"u-1","total_cents":100,"count":1,"recipients":[null]}`, "recipients"},
	{"a recipient after another", `{"sender_id":"u-1","total_cents":100,"count":1,"recipients":["u-2",null]}`, "recipients"},
}

func TestCreateRefusesNull(t *testing.T) {
	t.Parallel()
	s, c := newClient(t)
	for _, tc := range nullCreates {
		for _, keyed := range []bool{false, true} {
			name := tc.name
			h := map[string]string{}
			if keyed {
				name += " with Idempotency-Key"
				h["Idempotency-Key"] = "null-" + strings.ReplaceAll(tc.name, " ", "-")
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				msg := requireError(t, c.doHeaders("POST", "/v1/envelopes", tc.body, h), http.StatusBadRequest, "invalid_argument")
				if !strings.HasPrefix(msg, tc.field+": ") || !strings.Contains(msg, "not null") {
					t.Errorf("message %q, want one naming %s and saying it must not be null", msg, tc.field)
				}
				if n := envelopeRows(t, s); n != 0 {
					t.Errorf("envelopes table has %d rows after a refused create, want 0", n)
				}
			})
		}
	}
}

// TestNullAsTextIsNoNull: "null" inside a string is text, not a null.
func TestNullAsTextIsNoNull(t *testing.T) {
	t.Parallel()
	_, c := newClient(t)
	e := c.create(`{` + validCreate + `,"greeting":"null","metadata":{"null":"null"},"password":"null"}`)
	if e.Greeting != "null" || e.Metadata["null"] != "null" || !e.HasPassword {
		t.Errorf("create with the text null: greeting %q, metadata %v, has_password %v", e.Greeting, e.Metadata, e.HasPassword)
	}
	if g := c.do("POST", grabPath(e.EnvelopeID), `{"user_id":"u-1","password":"null"}`); g.Status != http.StatusOK {
		t.Errorf("grab with the password null (text): %s, want 200", g)
	}
}

// TestContractFieldsRefuseNull holds every field of the contract's request
// bodies (docs/openapi.yaml) to the rule, so that a field added later is too:
// null is refused naming it, unless the contract types it as nullable.
func TestContractFieldsRefuseNull(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Type  any   `yaml:"type"`
					OneOf []any `yaml:"oneOf"`
					AnyOf []any `yaml:"anyOf"`
				} `yaml:"properties"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(src, &doc); err != nil {
		t.Fatal(err)
	}
	_, c := newClient(t)
	env := c.createN(100, 2, 3600)
	for _, op := range []struct {
		schema, path string
		valid        map[string]any
		created      int
	}{
		{"CreateRequest", "/v1/envelopes", map[string]any{"sender_id": "u-1", "total_cents": 100, "count": 1}, http.StatusCreated},
		{"GrabRequest", grabPath(env.EnvelopeID), map[string]any{"user_id": "u-1"}, http.StatusOK},
	} {
		props := doc.Components.Schemas[op.schema].Properties
		if len(props) == 0 {
			t.Fatalf("docs/openapi.yaml has no properties of %s", op.schema)
		}
		for name, p := range props {
			nullable := p.Type == "null" || strings.Contains(fmt.Sprint(p.OneOf, p.AnyOf), "type:null")
			if types, ok := p.Type.([]any); ok && slices.Contains(types, any("null")) {
				nullable = true
			}
			fields := map[string]any{name: nil}
			for k, v := range op.valid {
				if k != name {
					fields[k] = v
				}
			}
			body, _ := json.Marshal(fields)
			a := c.do("POST", op.path, string(body))
			if nullable {
				if a.Status != op.created {
					t.Errorf("%s %s: %s, want %d (the contract allows null)", op.schema, body, a, op.created)
				}
				continue
			}
			msg := requireError(t, a, http.StatusBadRequest, "invalid_argument")
			if !strings.HasPrefix(msg, name+": ") || !strings.Contains(msg, "not null") {
				t.Errorf("%s %s: message %q, want one naming %s and saying it must not be null", op.schema, body, msg, name)
			}
		}
	}
}

// TestCreateRefusesEmptyKindAndStart: "" is neither a kind (random, fixed)
// nor an RFC 3339 time, so it is refused, not read as the field left out.
func TestCreateRefusesEmptyKindAndStart(t *testing.T) {
	t.Parallel()
	s, c := newClient(t)
	for _, field := range []string{"kind", "starts_at"} {
		msg := requireError(t, c.do("POST", "/v1/envelopes", `{`+validCreate+`,"`+field+`":""}`),
			http.StatusBadRequest, "invalid_argument")
		if !strings.HasPrefix(msg, field+": ") {
			t.Errorf("%s \"\": message %q does not name %s", field, msg, field)
		}
	}
	if n := envelopeRows(t, s); n != 0 {
		t.Errorf("envelopes table has %d rows after refused creates, want 0", n)
	}
	// Left out, or expires_in_seconds as null (the contract's one nullable
	// field), they still take their defaults.
	e := c.create(`{` + validCreate + `,"expires_in_seconds":null}`)
	if e.Kind != "random" || e.StartsAt == "" {
		t.Errorf("create without kind and starts_at: kind %q, starts_at %q; want random and the creation time", e.Kind, e.StartsAt)
	}
}

func TestGrabRefusesNull(t *testing.T) {
	t.Parallel()
	_, c := newClient(t)
	locked := c.create(`{"sender_id":"sender-1","total_cents":100,"count":2,"password":"pw"}`)
	open := c.createN(100, 2, 3600)
	bodies := []struct{ name, body, field string }{
		{"user_id", `{"user_id":null}`, "user_id"},
		{"user_id beside a password", `{"user_id":null,"password":"pw"}`, "user_id"},
		{"password", `{"user_id":"u-1","password":null}`, "password"},
		{"password first", `{"password":null,"user_id":"u-1"}`, "password"},
		{"password with spaces", `{ "user_id": "u-1", "password": null }`, "password"},
	}
	for _, env := range []createResponse{locked, open} {
		for _, tc := range bodies {
			msg := requireError(t, c.do("POST", grabPath(env.EnvelopeID), tc.body), http.StatusBadRequest, "invalid_argument")
			if !strings.HasPrefix(msg, tc.field+": ") || !strings.Contains(msg, "not null") {
				t.Errorf("grab %s of %d: message %q, want one naming %s and saying it must not be null",
					tc.name, env.EnvelopeID, msg, tc.field)
			}
		}
		if st := c.status(env.EnvelopeID); st.GrabbedCount != 0 || st.RemainingCount != 2 {
			t.Errorf("envelope %d after refused grabs: %d grabbed, %d left; want 0 and 2",
				env.EnvelopeID, st.GrabbedCount, st.RemainingCount)
		}
	}
}

// The bodies of close and short-id have no field: a null member is refused
// as any member is, and the envelope stays open.
func TestBodilessPostsRefuseNull(t *testing.T) {
	t.Parallel()
	_, c := newClient(t)
	env := c.createN(100, 2, 3600)
	for _, path := range []string{fmt.Sprintf("/v1/envelopes/%d/close", env.EnvelopeID), "/v1/users/u-1/short-id"} {
		msg := requireError(t, c.do("POST", path, `{"closed":null}`), http.StatusBadRequest, "invalid_argument")
		if !strings.Contains(msg, `"closed"`) {
			t.Errorf("POST %s: message %q does not name the member", path, msg)
		}
	}
	if st := c.status(env.EnvelopeID); st.ClosedAt != nil || st.Status != "open" {
		t.Errorf("envelope after a refused close: status %q, closed_at %v; want open, none", st.Status, st.ClosedAt)
	}
}
