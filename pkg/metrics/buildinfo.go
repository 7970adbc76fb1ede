package metrics

import "github.com/prometheus/client_golang/prometheus"

// BuildInfo returns the collector of mcp_extproc_build_info, a gauge that
// is always 1 and tells by its labels which build is running: version and
// commit as stamped by hack/build.sh, and the Go release. Join on it to
// see a metric by version (a rollout, a rollback).
//
// client_golang's collectors.NewBuildInfoCollector does not fit: it reads
// the module version from the Go build info ("(devel)" for a main module
// built from a checkout) and has no commit.
func BuildInfo(version, commit, goVersion string) prometheus.Collector {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "build_info",
		Help: "Always 1; the labels say which build of mcp-extproc is running."},
		[]string{"version", "commit", "goversion"})
	g.WithLabelValues(version, commit, goVersion).Set(1)
	return g
}
