package apispec_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"redpacket/internal/apispec"
)

// TestContractIsValid loads docs/openapi.yaml: a valid OpenAPI 3.1 document.
func TestContractIsValid(t *testing.T) {
	t.Parallel()
	apispec.Require(t)
}

const (
	statusBody = `{"envelope_id":1001,"share_code":"26112148213","sender_id":"u-1","status":"open",` +
		`"total_cents":10000,"count":100,"grabbed_count":40,"grabbed_cents":4120,"remaining_count":60,` +
		`"refunded_cents":0,"created_at":"2026-11-21T10:00:00.000Z","expires_at":"2026-11-22T10:00:00.000Z"}`
	grabBody = `{"envelope_id":1001,"packet_id":50077,"amount_cents":87,"order_no":"202611210000000123",` +
		`"grabbed_at":"2026-11-21T10:00:01.123Z","repeat":false}`
)

func exchange(method, target, reqBody string, status int, resBody string, header ...string) apispec.Exchange {
	h := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"0123456789abcdef0123456789abcdef"}}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "" {
			h.Del(header[i])
			continue
		}
		h.Set(header[i], header[i+1])
	}
	req := httptest.NewRequest(method, target, nil)
	if reqBody != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return apispec.Exchange{Request: req, RequestBody: []byte(reqBody), Status: status, Header: h, ResponseBody: []byte(resBody)}
}

// TestCheckAcceptsTheDocumentedAnswers: the examples of docs/api.md conform.
func TestCheckAcceptsTheDocumentedAnswers(t *testing.T) {
	t.Parallel()
	s := apispec.Require(t)
	for name, ex := range map[string]apispec.Exchange{
		"status": exchange("GET", "/v1/envelopes/1001", "", 200, statusBody),
		"grab":   exchange("POST", "/v1/envelopes/1001/grab", `{"user_id":"u-42"}`, 200, grabBody),
		"sold out": exchange("POST", "/v1/envelopes/1001/grab", `{"user_id":"u-42"}`, 409,
			`{"error":{"code":"sold_out","message":"no packet left"}}`),
		"refused body": exchange("POST", "/v1/envelopes/1001/grab", `{"USER_ID":"u-42"}`, 400,
			`{"error":{"code":"invalid_argument","message":"unknown field \"USER_ID\""}}`),
		"unknown path": exchange("GET", "/v1/nothing", "", 404, `{"error":{"code":"not_found","message":"no such route"}}`),
		"405": exchange("DELETE", "/v1/envelopes/1001", "", 405,
			`{"error":{"code":"method_not_allowed","message":"DELETE is not allowed here"}}`, "Allow", "GET, HEAD"),
		"head": exchange("HEAD", "/v1/envelopes/1001", "", 200, ""),
		"rate limited": exchange("POST", "/v1/envelopes/1001/grab", `{"user_id":"u-42"}`, 429,
			`{"error":{"code":"rate_limited","message":"slow down"}}`, "Retry-After", "2"),
	} {
		if p := s.Check(ex); len(p) > 0 {
			t.Errorf("%s: %s", name, strings.Join(p, "\n"))
		}
	}
}

// TestCheckFindsDrift: each way an answer can leave the contract is caught.
func TestCheckFindsDrift(t *testing.T) {
	t.Parallel()
	s := apispec.Require(t)
	for name, ex := range map[string]apispec.Exchange{
		"undocumented field": exchange("GET", "/v1/envelopes/1001", "", 200,
			strings.Replace(statusBody, `"count":100`, `"count":100,"colour":"red"`, 1)),
		"missing field": exchange("POST", "/v1/envelopes/1001/grab", `{"user_id":"u-42"}`, 200,
			strings.Replace(grabBody, `,"repeat":false`, "", 1)),
		"time without milliseconds": exchange("GET", "/v1/envelopes/1001", "", 200,
			strings.Replace(statusBody, "10:00:00.000Z", "10:00:00Z", 1)),
		"unknown status": exchange("GET", "/v1/envelopes/1001", "", 200,
			strings.Replace(statusBody, `"open"`, `"paused"`, 1)),
		"code of another status": exchange("POST", "/v1/envelopes/1001/grab", `{"user_id":"u-42"}`, 409,
			`{"error":{"code":"not_found","message":"no such envelope"}}`),
		"undocumented status": exchange("GET", "/v1/envelopes/1001", "", 418,
			`{"error":{"code":"internal","message":"teapot"}}`),
		"no request id": exchange("GET", "/v1/envelopes/1001", "", 200, statusBody, "X-Request-Id", ""),
		"no Retry-After": exchange("POST", "/v1/envelopes/1001/grab", `{"user_id":"u-42"}`, 429,
			`{"error":{"code":"rate_limited","message":"slow down"}}`),
		"refused request accepted": exchange("POST", "/v1/envelopes/1001/grab", `{"user_id":"u 42"}`, 200, grabBody),
		"unknown path answered":    exchange("GET", "/v1/nothing", "", 200, `{}`),
		"wrong Allow": exchange("DELETE", "/v1/envelopes/1001", "", 405,
			`{"error":{"code":"method_not_allowed","message":"DELETE is not allowed here"}}`, "Allow", "POST"),
		"HEAD of no GET":      exchange("HEAD", "/v1/envelopes/1001/grab", "", 200, ""),
		"not the error shape": exchange("GET", "/v1/envelopes/1001", "", 404, `{"error":"not found"}`),
	} {
		p := s.Check(ex)
		if len(p) == 0 {
			t.Errorf("%s: the check passed", name)
		}
		t.Logf("%s: %s", name, strings.Join(p, "\n"))
	}
}
