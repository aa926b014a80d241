package config

import (
	"net"
	"strconv"
	"strings"
	"testing"
)

// METRICS_ADDR is refused when the grabber could not listen on both it and
// GRABBER_ADDR: the text differing is not enough (":8080" and
// "0.0.0.0:8080" are the same listener), so the daemon would start, fail to
// bind and exit 1 instead of 2 with the setting named.
func TestMetricsAddrMustNotOverlapGrabberAddr(t *testing.T) {
	for _, c := range []struct {
		grabber, metrics string
		refused          bool
	}{
		{"", ":8080", true}, // GRABBER_ADDR's default is :8080
		{"", "0.0.0.0:8080", true},
		{"", "[::]:8080", true},
		{"", "127.0.0.1:8080", true},
		{"", "[::1]:8080", true},
		{"0.0.0.0:8080", ":8080", true},
		{"127.0.0.1:8080", ":8080", true},
		{"127.0.0.1:8080", "127.0.0.1:8080", true},
		{"127.0.0.1:8080", "localhost:8080", true},
		{"127.0.0.1:8080", "[::ffff:127.0.0.1]:8080", true},
		{"api.internal:8080", "API.internal:8080", true},
		{"", "myhost:8080", true}, // a wildcard takes every address, a named host's too
		{"myhost:8080", "0.0.0.0:8080", true},
		{"myhost:8080", "otherhost:8080", false},
		{"", "127.0.0.1:9090", false},
		{"", ":9090", false},
		{"127.0.0.1:8080", "[::1]:8080", false},
		{"127.0.0.1:8080", "127.0.0.2:8080", false},
		{"127.0.0.1:8080", "10.0.0.5:8080", false},
		{":0", ":0", false}, // each picks a free port
	} {
		_, err := Load(env(map[string]string{"GRABBER_ADDR": c.grabber, "METRICS_ADDR": c.metrics}))
		if refused := err != nil && strings.Contains(err.Error(), "METRICS_ADDR="); refused != c.refused {
			t.Errorf("GRABBER_ADDR=%q METRICS_ADDR=%q: %v; want refused %v", c.grabber, c.metrics, err, c.refused)
		}
	}
}

// listenersOverlap agrees with the kernel: for addresses (not names), it
// says two listeners clash exactly when the second fails to bind.
func TestListenersOverlapAgreesWithBind(t *testing.T) {
	hosts := []string{"", "0.0.0.0", "::", "127.0.0.1", "127.0.0.2", "::1", "::ffff:127.0.0.1"}
	for _, a := range hosts {
		for _, b := range hosts {
			first, err := net.Listen("tcp", net.JoinHostPort(a, "0"))
			if err != nil {
				t.Logf("cannot listen on %q here: %v", a, err)
				continue
			}
			port := strconv.Itoa(first.Addr().(*net.TCPAddr).Port)
			addrA, addrB := net.JoinHostPort(a, port), net.JoinHostPort(b, port)
			second, err := net.Listen("tcp", addrB)
			clash := err != nil
			if second != nil {
				_ = second.Close()
			}
			_ = first.Close()
			if clash && !strings.Contains(err.Error(), "address already in use") {
				t.Logf("%s: %v (not a clash: skipped)", addrB, err)
				continue
			}
			if got := listenersOverlap(addrA, addrB); got != clash {
				t.Errorf("listenersOverlap(%q, %q) = %v; binding both: %v", addrA, addrB, got, err)
			}
		}
	}
}
