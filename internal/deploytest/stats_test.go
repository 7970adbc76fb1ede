package deploytest

import (
	"fmt"
	"slices"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
)

// statsPath is the admin page with Envoy's stats in Prometheus' format.
const statsPath = "/stats/prometheus"

// statsEndpoint is where Envoy's stats listener serves statsPath.
type statsEndpoint struct {
	port uint32
	path string
}

// statsCheck finds and checks the stats listener of a bootstrap: a listener
// whose routes reach the admin interface through a static cluster. Exposing
// the admin port itself would hand the network /quitquitquit and
// /config_dump; the listener must route exactly statsPath there, nothing
// else, unrewritten.
type statsCheck struct {
	admin    hostPort
	clusters map[string]*clusterv3.Cluster
	found    []statsEndpoint
}

// isAdminCluster reports whether cluster name reaches the admin address.
func (sc *statsCheck) isAdminCluster(name string) bool {
	c, ok := sc.clusters[name]
	return ok && slices.Contains(clusterEndpoints(c), sc.admin)
}

// isStatsListener reports whether a route of h reaches the admin address.
func (sc *statsCheck) isStatsListener(h *hcmv3.HttpConnectionManager) bool {
	return slices.ContainsFunc(routedClusters(h), sc.isAdminCluster)
}

// check checks one stats listener and records its endpoint.
func (sc *statsCheck) check(l *listenerv3.Listener, h *hcmv3.HttpConnectionManager) []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("stats listener %s: "+format, append([]any{l.GetName()}, args...)...))
	}
	port := l.GetAddress().GetSocketAddress().GetPortValue()
	if port == sc.admin.port {
		bad("listens on the admin port %d", port)
	}
	serves := false
	for _, vh := range h.GetRouteConfig().GetVirtualHosts() {
		for i, r := range vh.GetRoutes() {
			ra := r.GetRoute()
			if ra == nil {
				continue
			}
			where := fmt.Sprintf("virtual host %s: route %d", vh.GetName(), i)
			if !sc.isAdminCluster(ra.GetCluster()) {
				bad("%s: routes to %q; a stats listener reaches the admin cluster only", where, ra.GetCluster())
				continue
			}
			if ra.GetPrefixRewrite() != "" || ra.GetRegexRewrite() != nil || ra.GetPathRewritePolicy() != nil {
				bad("%s: rewrites the path: any admin endpoint could be reached", where)
				continue
			}
			m, ok := r.GetMatch().GetPathSpecifier().(*routev3.RouteMatch_Path)
			if !ok || m.Path != statsPath {
				bad("%s: exposes the admin interface beyond %s (match %v): route that exact path only", where, statsPath, r.GetMatch().GetPathSpecifier())
				continue
			}
			serves = true
		}
	}
	if serves {
		sc.found = append(sc.found, statsEndpoint{port: port, path: statsPath})
	}
	return errs
}

// result returns the one stats endpoint found, adding to errs when there
// is none or more than one.
func (sc *statsCheck) result(errs []error) (statsEndpoint, []error) {
	switch len(sc.found) {
	case 1:
		return sc.found[0], errs
	case 0:
		return statsEndpoint{}, append(errs, fmt.Errorf("no listener serves %s from the admin interface (a route to a static cluster at the admin address %s): Envoy's ext_proc stats cannot be scraped", statsPath, sc.admin))
	}
	return sc.found[0], append(errs, fmt.Errorf("%d stats listeners; want one", len(sc.found)))
}
