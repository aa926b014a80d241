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
