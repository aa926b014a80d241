package dburl

import "testing"

func TestSession(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"postgres://u@h:5432/db?sslmode=disable&pool_max_conns=8&pool_min_conns=2",
			"postgres://u@h:5432/db?sslmode=disable"},
		{"postgres://u@h/db?pool_max_conns=8", "postgres://u@h/db"},
		// Nothing of the pool's: the URL as it was, byte for byte.
		{"postgres://u@h/db?sslmode=disable&application_name=a%20b", "postgres://u@h/db?sslmode=disable&application_name=a%20b"},
		{"host=h user=u pool_max_conns=8", "host=h user=u pool_max_conns=8"},
	} {
		if got := Session(c.in); got != c.want {
			t.Errorf("Session(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// Connections accept only a writable server unless the URL asks otherwise.
func TestWritableUnlessTheURLSaysOtherwise(t *testing.T) {
	for url, want := range map[string]bool{
		"postgres://u@h/db":                          true,
		"postgres://u@h/db?pool_max_conns=4":         true,
		"postgres://u@h/db?target_session_attrs=any": false,
	} {
		cfg, err := SessionConfig(url)
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		if got := cfg.ValidateConnect != nil; got != want {
			t.Errorf("%s: validates a writable server %v, want %v", url, got, want)
		}
	}
}
