package deploytest

import (
	"net"
	"strconv"
	"strings"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
)

// gatewayRedisDir is the gateway shape with replicas sharing the
// attribution store through Valkey.
const gatewayRedisDir = "manifests/overlays/gateway-redis"

// checkGatewayRedis checks what the shared store needs: more than one
// extproc replica, each configured with store: redis, and every address a
// Service port of the render (or a name outside it, left to the user).
func checkGatewayRedis(r *rendered, pods []*pod) []error {
	var p problems
	n := 0
	for _, pd := range pods {
		if pd.extproc == nil {
			continue
		}
		n++
		if pd.d.Spec.Replicas == nil || *pd.d.Spec.Replicas < 2 {
			p.addf("%s: want at least two replicas", pd.where)
		}
		cfg := pd.extproc.cfg
		if cfg == nil {
			continue // reported by checkExtprocContainer
		}
		a := cfg.Extproc.Attribution
		if a.Store != config.StoreRedis || a.Redis == nil {
			p.addf("%s: extproc.attribution.store is %q, want redis", pd.where, a.Store)
			continue
		}
		for _, addr := range a.Redis.Addresses {
			if !redisServiceFound(r, pd.d.Namespace, addr) {
				p.addf("%s: redis address %s is no Service port of the overlay", pd.where, addr)
			}
		}
	}
	if n != 1 {
		p.addf("%s: want one extproc Deployment, found %d", r.dir, n)
	}
	return p.errs
}

// redisServiceFound reports whether addr (service[.namespace[.svc...]]:port)
// names a port of a Service in r.
func redisServiceFound(r *rendered, ns, addr string) bool {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return false
	}
	name, rest, _ := strings.Cut(host, ".")
	if rest != "" {
		ns, _, _ = strings.Cut(rest, ".")
	}
	for _, svc := range r.services {
		if svc.Name != name || svc.Namespace != ns {
			continue
		}
		for _, sp := range svc.Spec.Ports {
			if int(sp.Port) == port {
				return true
			}
		}
	}
	return false
}
