package telemetry

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Registry is one daemon's metrics: its own, its build, the Go runtime's and
// the process's, and nothing of the other daemon's.
type Registry struct {
	*prometheus.Registry
}

// The daemons' registries. Each daemon adds what needs its clients
// (NewDependencyCollector, NewLedgerCollector) at start and serves its
// registry with Handler.
var (
	Grabber = newRegistry(grabberCollectors()...)
	Flusher = newRegistry(flusherCollectors()...)
)

func newRegistry(own ...prometheus.Collector) *Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfoGauge(BuildInfo()))
	r.MustRegister(own...)
	return &Registry{r}
}

// buildInfoGauge is redpacket_build_info, always 1, labelled with the build.
func buildInfoGauge(b Build) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "redpacket_build_info",
		Help: "Always 1; the labels name the code the daemon was built from.",
		ConstLabels: prometheus.Labels{
			"version": b.Version, "commit": b.Commit, "go_version": b.GoVersion,
		},
	})
	g.Set(1)
	return g
}

// Handler serves the registry in the Prometheus text format.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.Registry, promhttp.HandlerOpts{Registry: r.Registry})
}
