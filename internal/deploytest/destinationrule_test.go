package deploytest

import (
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// sessionHeader is the MCP session header a DestinationRule may hash on.
const sessionHeader = "Mcp-Session-Id"

// destinationRule is the part of Istio's networking.istio.io/v1
// DestinationRule that these manifests may use, decoded strictly.
type destinationRule struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		Host          string `json:"host"`
		TrafficPolicy *struct {
			LoadBalancer *struct {
				Simple         string `json:"simple,omitempty"`
				ConsistentHash *struct {
					HTTPHeaderName string `json:"httpHeaderName,omitempty"`
					RingHash       *struct {
						MinimumRingSize uint64 `json:"minimumRingSize,omitempty"`
					} `json:"ringHash,omitempty"`
				} `json:"consistentHash,omitempty"`
			} `json:"loadBalancer,omitempty"`
		} `json:"trafficPolicy,omitempty"`
	} `json:"spec"`
}

// checkDestinationRule checks that dr applies to a Service of the
// deployment (by its fully qualified name: a short name would depend on the
// rule's namespace) and keeps MCP sessions on one endpoint.
func checkDestinationRule(r *rendered, dr *destinationRule, p *problems) {
	where := r.dir + ": DestinationRule " + dr.Metadata.Name
	name, ns, ok := serviceOfHost(dr.Spec.Host)
	if !ok {
		p.addf("%s: host %q is not <service>.<namespace>.svc.cluster.local", where, dr.Spec.Host)
	} else if findService(r, ns, name) == nil {
		p.addf("%s: host %q names no Service of the deployment", where, dr.Spec.Host)
	}
	tp := dr.Spec.TrafficPolicy
	if tp == nil || tp.LoadBalancer == nil || tp.LoadBalancer.ConsistentHash == nil {
		p.addf("%s: no trafficPolicy.loadBalancer.consistentHash: requests of one MCP session would be spread over replicas", where)
		return
	}
	if h := tp.LoadBalancer.ConsistentHash.HTTPHeaderName; http.CanonicalHeaderKey(h) != sessionHeader {
		p.addf("%s: consistentHash.httpHeaderName %q, want %s", where, h, sessionHeader)
	}
}

// serviceOfHost splits NAME.NAMESPACE.svc.cluster.local.
func serviceOfHost(host string) (name, ns string, ok bool) {
	parts := strings.Split(host, ".")
	if len(parts) != 5 || strings.Join(parts[2:], ".") != "svc.cluster.local" {
		return "", "", false
	}
	return parts[0], parts[1], true
}

func findService(r *rendered, ns, name string) *corev1.Service {
	for _, s := range r.services {
		if s.Namespace == ns && s.Name == name {
			return s
		}
	}
	return nil
}

func TestCheckDestinationRule(t *testing.T) {
	r := &rendered{dir: "d", services: []*corev1.Service{{ObjectMeta: metav1.ObjectMeta{Name: "plugin", Namespace: "ns"}}}}
	good := func() *destinationRule {
		dr := &destinationRule{}
		if err := decodeStrict([]byte(`{"apiVersion":"networking.istio.io/v1","kind":"DestinationRule",
			"metadata":{"name":"x"},"spec":{"host":"plugin.ns.svc.cluster.local",
			"trafficPolicy":{"loadBalancer":{"consistentHash":{"httpHeaderName":"mcp-session-id"}}}}}`), dr); err != nil {
			t.Fatal(err)
		}
		return dr
	}
	tests := []struct {
		name   string
		break_ func(*destinationRule)
		want   string
	}{
		{"good", func(*destinationRule) {}, ""},
		{"short host", func(d *destinationRule) { d.Spec.Host = "plugin" }, "is not"},
		{"unknown Service", func(d *destinationRule) { d.Spec.Host = "other.ns.svc.cluster.local" }, "names no Service"},
		{"no hash", func(d *destinationRule) { d.Spec.TrafficPolicy = nil }, "no trafficPolicy"},
		{"other header", func(d *destinationRule) {
			d.Spec.TrafficPolicy.LoadBalancer.ConsistentHash.HTTPHeaderName = "x-user"
		}, "want Mcp-Session-Id"},
	}
	for _, tt := range tests {
		dr := good()
		tt.break_(dr)
		var p problems
		checkDestinationRule(r, dr, &p)
		switch {
		case tt.want == "" && len(p.errs) > 0:
			t.Errorf("%s: %v", tt.name, p.errs)
		case tt.want != "" && (len(p.errs) != 1 || !strings.Contains(p.errs[0].Error(), tt.want)):
			t.Errorf("%s: problems %v, want one containing %q", tt.name, p.errs, tt.want)
		}
	}
}
