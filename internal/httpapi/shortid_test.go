package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

func TestShortID(t *testing.T) {
	t.Parallel()
	_, c := newClient(t)
	first := c.do("POST", "/v1/users/u-42/short-id", "")
	if first.Status != http.StatusOK {
		t.Fatalf("short id: %s", first)
	}
	requireKeys(t, first, "user_id", "short_id")
	for _, body := range []string{"{}", ""} { // same user, same id; {} or no body
		again := c.do("POST", "/v1/users/u-42/short-id", body)
		if again.Status != http.StatusOK || string(again.Body) != string(first.Body) {
			t.Errorf("second short id for u-42 (body %q): %s, first was %s", body, again, first)
		}
	}
	other := c.do("POST", "/v1/users/u-43/short-id", "")
	if other.Status != http.StatusOK || string(other.Body) == strings.Replace(string(first.Body), "u-42", "u-43", 1) {
		t.Errorf("u-43 got %s; u-42 has %s", other, first)
	}
	for path, code := range map[string]string{
		"/v1/users/bad%20id/short-id":                        "invalid_argument",
		"/v1/users/" + strings.Repeat("x", 65) + "/short-id": "invalid_argument",
	} {
		a := c.do("POST", path, "")
		requireError(t, a, http.StatusBadRequest, code)
	}
	requireError(t, c.do("POST", "/v1/users/u-42/short-id", `{"x":1}`), http.StatusBadRequest, "invalid_argument")
	requireError(t, c.do("GET", "/v1/users/u-42/short-id", ""), http.StatusMethodNotAllowed, "method_not_allowed")
}
