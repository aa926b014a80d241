package redact

import (
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	for raw, want := range map[string]string{
		"https://hooks.example/x":                    "https://hooks.example/x",
		"https://user:hunter2@hooks.example/x":       "https://user:xxxxx@hooks.example/x",
		"https://tok3n@hooks.example/x":              "https://xxxxx@hooks.example/x",
		"https://hooks.example/x?token=s3cr3t&a=1":   "https://hooks.example/x?token=xxxxx&a=xxxxx",
		"https://hooks.example/x?s3cr3t":             "https://hooks.example/x?s3cr3t",
		"https://hooks.example/x#frag-s3cr3t":        "https://hooks.example/x",
		"postgres://u:p%40ss@db:5432/x?password=p2":  "postgres://u:xxxxx@db:5432/x?password=xxxxx",
		"redis://:hunter2@127.0.0.1:6379/0":          "redis://:xxxxx@127.0.0.1:6379/0",
		"https://u:hun ter2@h/x":                     "(not shown: not a valid URL)",
		"mailto:hunter2@example.com":                 "(not shown: not a valid URL)",
		"host=db user=app password=s3cret dbname=rp": "(not shown: not a valid URL)",
		"//u:p@h/x": "(not shown: not a valid URL)",
	} {
		if got := URL(raw); got != want {
			t.Errorf("URL(%q) = %q, want %q", raw, got, want)
		}
	}
}

func TestText(t *testing.T) {
	raw := "postgres://u:p%40ss%20w@db/x?password=q%2Fz&sslmode=disable"
	msg := `cannot parse "` + raw + `": bad; password p@ss w, q/z`
	got := Text(msg, Secrets(raw)...)
	for _, s := range []string{"p@ss", "p%40ss", "q/z", "q%2Fz"} {
		if strings.Contains(got, s) {
			t.Errorf("Text left %q in %q", s, got)
		}
	}
	if sec := Secrets("https://u:hunter2@h/x?token=t0k&a=1"); len(sec) != 6 {
		t.Errorf("Secrets = %q, want the password and two query values, each twice", sec)
	}
	if sec := Secrets("https://t0k3n@h/x"); len(sec) != 2 || sec[0] != "t0k3n" {
		t.Errorf("Secrets = %q, want the user name", sec)
	}
}
