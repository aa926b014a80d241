package devenv

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// environ is an environment for the daemons: this process's, with values
// set over it.
type environ struct {
	vars      map[string]string
	throwaway map[string]string // variable naming a throwaway server -> its directory
}

func newEnviron(list []string) *environ {
	e := &environ{vars: map[string]string{}, throwaway: map[string]string{}}
	for _, kv := range list {
		if k, v, ok := strings.Cut(kv, "="); ok {
			e.vars[k] = v
		}
	}
	return e
}

func (e *environ) set(k, v string) { e.vars[k] = v }

func (e *environ) list() []string {
	out := make([]string, 0, len(e.vars))
	for k, v := range e.vars {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// printSummary says where everything is, and how to try it.
func printSummary(w io.Writer, e *environ, grabberAddr, flusherAddr string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "\nredpacket is running; Ctrl-C stops everything started here.\n")
	fmt.Fprintf(&b, "  API       http://%s\n", grabberAddr)
	fmt.Fprintf(&b, "  flusher   http://%s/metrics\n", flusherAddr)
	for _, k := range []string{"DATABASE_URL", "REDIS_URL", "REDIS_CLUSTER_ADDRS"} {
		v, ok := e.vars[k]
		if !ok || v == "" {
			continue
		}
		note := "(from the environment)"
		if dir, ok := e.throwaway[k]; ok {
			note = "(throwaway server in " + dir + ", removed at exit)"
		}
		fmt.Fprintf(&b, "  export %s='%s'   %s\n", k, v, note)
	}
	auth := ""
	if e.vars["GRABBER_API_TOKEN"] != "" {
		auth = ` -H "Authorization: Bearer $GRABBER_API_TOKEN"`
	}
	api := "http://" + grabberAddr
	fmt.Fprintf(&b, "Try:\n")
	fmt.Fprintf(&b, "  curl -s%s -XPOST %s/v1/envelopes -d '{\"sender_id\":\"alice\",\"total_cents\":1000,\"count\":10,\"expires_in_seconds\":3600}'\n", auth, api)
	fmt.Fprintf(&b, "  curl -s%s -XPOST %s/v1/envelopes/<id>/grab -d '{\"user_id\":\"bob\"}'\n", auth, api)
	fmt.Fprintf(&b, "  curl -s%s %s/v1/envelopes/<id>\n\n", auth, api)
	_, err := io.WriteString(w, b.String())
	return err
}
