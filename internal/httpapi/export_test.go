package httpapi

import (
	"net/http"
	"slices"
)

// ServedRoutes lists the routes h (a handler of this package) serves, as
// "METHOD pattern": its router's and its endpoints' (grab and by-code share
// one ServeMux pattern, so only the endpoints name them).
func ServedRoutes(h http.Handler) []string {
	var out []string
	switch h := h.(type) {
	case *API:
		out = append(out, h.served...)
		for _, ep := range h.endpoints {
			out = append(out, ep.Method+" "+ep.Pattern)
		}
	case *router:
		out = append(out, h.served...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
