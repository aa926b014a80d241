package config

import (
	"strings"
	"testing"
)

// GRABBER_AUTH defaults by the token, and a mode the token contradicts is
// refused, naming GRABBER_AUTH, without repeating the token.
func TestAuthModes(t *testing.T) {
	const token = "hunter2x-token"
	for _, c := range []struct {
		auth, token string
		want        AuthMode // "" when refused
	}{
		{"", "", AuthNone},
		{"", token, AuthToken},
		{"none", "", AuthNone},
		{"token", token, AuthToken},
		{"keys", "", AuthKeys},
		{"none", token, ""},
		{"token", "", ""},
		{"keys", token, ""},
		{"Keys", "", ""},
		{"bearer", "", ""},
	} {
		cfg, err := Load(env(map[string]string{"GRABBER_AUTH": c.auth, "GRABBER_API_TOKEN": c.token}))
		switch {
		case c.want == "" && (err == nil || !strings.Contains(err.Error(), "GRABBER_AUTH=")):
			t.Errorf("GRABBER_AUTH=%q with token %v: error %v, want one naming GRABBER_AUTH", c.auth, c.token != "", err)
		case c.want == "" && strings.Contains(err.Error(), token):
			t.Errorf("the error repeats the token: %v", err)
		case c.want != "" && (err != nil || cfg.GrabberAuth != c.want):
			t.Errorf("GRABBER_AUTH=%q with token %v: %q, %v; want %q", c.auth, c.token != "", cfg.GrabberAuth, err, c.want)
		}
	}
}

func TestAccessLogAndMetricsAddr(t *testing.T) {
	c, err := Load(env(nil))
	if err != nil || c.AccessLog || c.MetricsAddr != "" {
		t.Fatalf("defaults: access log %v, metrics addr %q, %v", c.AccessLog, c.MetricsAddr, err)
	}
	c, err = Load(env(map[string]string{"ACCESS_LOG": "on", "METRICS_ADDR": "127.0.0.1:9090"}))
	if err != nil || !c.AccessLog || c.MetricsAddr != "127.0.0.1:9090" {
		t.Fatalf("ACCESS_LOG=on METRICS_ADDR=127.0.0.1:9090: %v %q %v", c.AccessLog, c.MetricsAddr, err)
	}
	for name, vars := range map[string]map[string]string{
		"ACCESS_LOG=":     {"ACCESS_LOG": "yes"},
		"ACCESS_LOG=\"":   {"ACCESS_LOG": "on", "LOG_LEVEL": "warn"}, // its lines would all be dropped
		"METRICS_ADDR=":   {"METRICS_ADDR": "9090"},
		"METRICS_ADDR=\"": {"METRICS_ADDR": ":8080"}, // GRABBER_ADDR's default
	} {
		if _, err := Load(env(vars)); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%v: error %v, want one naming %s", vars, err, name)
		}
	}
}
