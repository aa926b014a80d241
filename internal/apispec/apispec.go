// Package apispec checks HTTP exchanges against the API's contract,
// docs/openapi.yaml, with an OpenAPI 3.1 validator: the tests' servers run
// every request they serve and every answer they give through it, so the
// contract and the code cannot drift apart unnoticed. Only tests use it.
//
// An exchange conforms when:
//   - its request is valid against the operation and its answer is one the
//     operation documents (status, headers, body); or
//   - its request is not valid against the operation and its answer is a
//     4xx the operation documents (the server refuses what the contract
//     refuses);
//   - for a path no operation has: a 404 not_found, a 401 unauthenticated
//     (under /v1/) or a 400 invalid_argument (a query that does not parse),
//     in the error shape;
//   - for a method the path has no operation for: a 405 method_not_allowed
//     whose Allow header lists the path's methods (GET with HEAD), or one of
//     the answers above;
//   - a HEAD is answered as the GET would be (the server drops the body).
package apispec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	verrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/paths"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"
)

// File is the contract's path from the module's root.
const File = "docs/openapi.yaml"

// Spec is the loaded contract.
type Spec struct {
	doc *v3.Document
	// full checks requests and answers; bodiless checks the status and
	// headers of an answer only (a HEAD's, which has no body).
	full, bodiless validator.Validator
}

var (
	loadOnce sync.Once
	loaded   *Spec
	loadErr  error
)

// Load reads the contract once per test binary; the module's root is found
// from the working directory (a test runs in its package's directory).
func Load() (*Spec, error) {
	loadOnce.Do(func() { loaded, loadErr = load() })
	return loaded, loadErr
}

func load() (*Spec, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	src, err := os.ReadFile(filepath.Join(root, File))
	if err != nil {
		return nil, err
	}
	return Parse(src)
}

// Parse builds a Spec from the contract's text, refusing one that is not a
// valid OpenAPI 3.1 document.
func Parse(src []byte) (*Spec, error) {
	doc, err := libopenapi.NewDocument(src)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", File, err)
	}
	if v := doc.GetVersion(); !strings.HasPrefix(v, "3.1") {
		return nil, fmt.Errorf("%s: OpenAPI %s, want 3.1", File, v)
	}
	// Credentials depend on the server's GRABBER_AUTH, which the contract
	// cannot know: the tests of authentication check them.
	full, errs := validator.NewValidator(doc, config.WithoutSecurityValidation())
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s: %w", File, errors.Join(errs...))
	}
	if ok, verrs := full.ValidateDocument(); !ok {
		return nil, fmt.Errorf("%s is not a valid OpenAPI document:\n%s", File, describe(verrs))
	}
	bodiless, errs := validator.NewValidator(doc, config.WithoutSecurityValidation(),
		config.WithoutResponseBodyValidation(), config.WithoutRequestBodyValidation())
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s: %w", File, errors.Join(errs...))
	}
	model, err := doc.BuildV3Model()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", File, err)
	}
	return &Spec{doc: &model.Model, full: full, bodiless: bodiless}, nil
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("apispec: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Exchange is one request and its answer, with their bodies read.
type Exchange struct {
	Request      *http.Request // its body is not read: RequestBody is
	RequestBody  []byte
	Status       int
	Header       http.Header
	ResponseBody []byte
	// OtherServer is set for the flusher's operations server and the
	// grabber's metrics listener: they serve a part of the contract's
	// routes (404 not_found for the rest) and give no request id; all else
	// about their answers is the API's.
	OtherServer bool
}

// Check returns what in ex breaks the contract; nothing when it conforms.
func (s *Spec) Check(ex Exchange) []string {
	if ex.Request.Method == http.MethodHead {
		// A server never sends the body a handler writes to a HEAD (a
		// test's recorder keeps it).
		ex.ResponseBody = nil
	}
	req := ex.request()
	res := ex.response()
	if ex.OtherServer && res.Header.Get("X-Request-Id") == "" {
		res.Header.Set("X-Request-Id", "none")
	}
	pathItem, missing, _ := paths.FindPath(req, s.doc, nil)
	switch {
	case pathItem == nil, ex.OtherServer && ex.Status == http.StatusNotFound:
		return checkUnrouted(ex, res, nil)
	case len(missing) > 0 && ex.Request.Method == http.MethodHead && pathItem.Get != nil:
		return s.checkHead(ex, res)
	case len(missing) > 0:
		return checkUnrouted(ex, res, allowOf(pathItem))
	}
	var problems []string
	reqOK, reqErrs := s.full.ValidateHttpRequestSync(req)
	if !reqOK && (ex.Status < 400 || ex.Status >= 500) {
		problems = append(problems, fmt.Sprintf("the contract refuses this request, the server answered %d:\n%s",
			ex.Status, describe(reqErrs)))
	}
	if ok, errs := s.full.ValidateHttpResponse(ex.request(), res); !ok {
		problems = append(problems, "the answer breaks the contract:\n"+describe(errs))
	}
	return problems
}

// checkHead checks a HEAD as the GET it is served as, without a body.
func (s *Spec) checkHead(ex Exchange, res *http.Response) []string {
	var problems []string
	if len(ex.ResponseBody) > 0 {
		problems = append(problems, "a HEAD answer has a body")
	}
	get := ex.request()
	get.Method = http.MethodGet
	if ok, errs := s.bodiless.ValidateHttpResponse(get, res); !ok {
		problems = append(problems, "the answer (as a GET's) breaks the contract:\n"+describe(errs))
	}
	return problems
}

// checkUnrouted checks the answer to a path no operation has (allow nil)
// or a method its path has no operation for (allow: the path's methods).
func checkUnrouted(ex Exchange, res *http.Response, allow []string) []string {
	code, err := errorCode(ex)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	if !ex.OtherServer && res.Header.Get("X-Request-Id") == "" {
		problems = append(problems, "the answer has no X-Request-Id")
	}
	switch {
	case ex.Status == http.StatusBadRequest && code == "invalid_argument" && ex.Request.URL.RawQuery != "":
	case ex.Status == http.StatusUnauthorized && code == "unauthenticated" &&
		strings.HasPrefix(ex.Request.URL.Path, "/v1/") && res.Header.Get("WWW-Authenticate") != "":
	case ex.Status == http.StatusNotFound && code == "not_found":
	case ex.Status == http.StatusMethodNotAllowed && code == "method_not_allowed" && allow != nil:
		if got, want := res.Header.Get("Allow"), strings.Join(allow, ", "); got != want {
			problems = append(problems, fmt.Sprintf("Allow = %q, the contract has %q for this path", got, want))
		}
	case allow == nil:
		problems = append(problems, fmt.Sprintf("the contract has no path %s, the answer is %d %s", ex.Request.URL.Path, ex.Status, code))
	default:
		problems = append(problems, fmt.Sprintf("the contract has no %s on this path, the answer is %d %s",
			ex.Request.Method, ex.Status, code))
	}
	return problems
}

// errorCode reads the API's error shape, refusing anything else.
func errorCode(ex Exchange) (string, error) {
	var body struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(ex.ResponseBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || body.Error == nil || body.Error.Code == "" || body.Error.Message == "" {
		return "", fmt.Errorf("answer %d %q is not in the error shape", ex.Status, ex.ResponseBody)
	}
	return body.Error.Code, nil
}

// allowOf is what a 405 on the path must list: its methods, GET with HEAD.
func allowOf(p *v3.PathItem) []string {
	var out []string
	for method := range p.GetOperations().KeysFromOldest() {
		m := strings.ToUpper(method)
		out = append(out, m)
		if m == http.MethodGet {
			out = append(out, http.MethodHead)
		}
	}
	slices.Sort(out)
	return out
}

func (ex Exchange) request() *http.Request {
	r := ex.Request.Clone(ex.Request.Context())
	r.Body = io.NopCloser(bytes.NewReader(ex.RequestBody))
	r.ContentLength = int64(len(ex.RequestBody))
	if len(ex.RequestBody) == 0 {
		r.Body = http.NoBody
	}
	// The API reads a body as JSON whatever its Content-Type says (the
	// contract says so); the validator needs one to pick the schema.
	if len(ex.RequestBody) > 0 && r.Header.Get("Content-Type") == "" {
		r.Header.Set("Content-Type", "application/json")
	}
	return r
}

func (ex Exchange) response() *http.Response {
	return &http.Response{
		StatusCode: ex.Status, Header: ex.Header.Clone(), Request: ex.Request,
		Body: io.NopCloser(bytes.NewReader(ex.ResponseBody)), ContentLength: int64(len(ex.ResponseBody)),
	}
}

func describe(errs []*verrors.ValidationError) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "  - %s: %s", e.Message, e.Reason)
		for _, f := range e.SchemaValidationErrors {
			fmt.Fprintf(&b, "\n      %s (at %s, schema %s)", f.Reason, f.FieldPath, f.KeywordLocation)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// Operation is one operation of the contract.
type Operation struct {
	Method string // upper case
	Path   string // as the contract writes it: /v1/envelopes/{envelope_id}
	// Scopes are those the bearer requirement names (an API key's scope);
	// none outside /v1/.
	Scopes []string
}

// Operations lists the contract's operations in its order.
func (s *Spec) Operations() []Operation {
	var out []Operation
	for path, item := range s.doc.Paths.PathItems.FromOldest() {
		for method, op := range item.GetOperations().FromOldest() {
			o := Operation{Method: strings.ToUpper(method), Path: path}
			for _, req := range op.Security {
				if req.Requirements == nil {
					continue
				}
				o.Scopes = append(o.Scopes, req.Requirements.GetOrZero("bearer")...)
			}
			out = append(out, o)
		}
	}
	return out
}

// Allow is what a 405 on path must list: its methods, GET with HEAD; nil
// when the contract has no such path.
func (s *Spec) Allow(path string) []string {
	item := s.doc.Paths.PathItems.GetOrZero(path)
	if item == nil {
		return nil
	}
	return allowOf(item)
}
