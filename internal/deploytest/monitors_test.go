package deploytest

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// extprocMetricsPath is where extproc's admin port serves its metrics.
const extprocMetricsPath = "/metrics"

// podsSelected lists the checked Pods of namespace ns that sel selects.
func podsSelected(pods []*pod, ns string, sel *metav1.LabelSelector) ([]*pod, error) {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, err
	}
	var out []*pod
	for _, pd := range pods {
		if pd.d.Namespace == ns && !s.Empty() && s.Matches(labels.Set(pd.d.Spec.Template.Labels)) {
			out = append(out, pd)
		}
	}
	return out, nil
}

// checkScrape checks that port (a container port number) and path of a
// Pod are a metrics endpoint: Envoy's stats listener, or extproc's admin
// port.
func checkScrape(pd *pod, port int32, path, where string, p *problems) {
	switch {
	case pd.envoy != nil && hasPort(pd.envoy, port):
		if pd.stats.port == 0 || uint32(port) != pd.stats.port {
			p.addf("%s: port %d of Envoy is not its stats listener (%d): scrape that, never the admin or MCP port", where, port, pd.stats.port)
		} else if path != pd.stats.path {
			p.addf("%s: path %q, Envoy's stats listener serves %s", where, path, pd.stats.path)
		}
	case pd.extproc != nil && hasPort(pd.extproc.c, port):
		if port != pd.extproc.adminPort {
			p.addf("%s: port %d of extproc is not its admin port %d (metrics)", where, port, pd.extproc.adminPort)
		} else if path != "" && path != extprocMetricsPath {
			p.addf("%s: path %q, extproc serves %s", where, path, extprocMetricsPath)
		}
	default:
		p.addf("%s: port %d is no metrics port of Envoy or extproc in %s", where, port, pd.where)
	}
}

// checkMonitors checks every PodMonitor and ServiceMonitor: it selects
// Pods (Services), and each endpoint names a port that serves metrics at
// the path it scrapes.
func checkMonitors(r *rendered, pods []*pod, p *problems) {
	for _, pm := range r.podMonitors {
		where := fmt.Sprintf("%s: PodMonitor %s", r.dir, pm.Metadata.Name)
		selected, err := podsSelected(pods, monitorNamespace(pm.Metadata.Namespace, pm.Spec.NamespaceSelector), &pm.Spec.Selector)
		if err != nil || len(selected) == 0 {
			p.addf("%s: selects no Deployment's Pods", where)
			continue
		}
		for i, ep := range pm.Spec.PodMetricsEndpoints {
			ew := fmt.Sprintf("%s: podMetricsEndpoints[%d]", where, i)
			for _, pd := range selected {
				port, ok := podPort(pd, ep.Port)
				if !ok {
					p.addf("%s: port %q is not a named port of %s", ew, ep.Port, pd.where)
					continue
				}
				checkScrape(pd, port, ep.Path, ew, p)
			}
		}
	}
	for _, sm := range r.svcMonitors {
		where := fmt.Sprintf("%s: ServiceMonitor %s", r.dir, sm.Metadata.Name)
		ns := monitorNamespace(sm.Metadata.Namespace, sm.Spec.NamespaceSelector)
		sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
		var svcs []*corev1.Service
		for _, svc := range r.services {
			if err == nil && !sel.Empty() && svc.Namespace == ns && sel.Matches(labels.Set(svc.Labels)) {
				svcs = append(svcs, svc)
			}
		}
		if len(svcs) == 0 {
			p.addf("%s: selects no Service", where)
			continue
		}
		for i, ep := range sm.Spec.Endpoints {
			ew := fmt.Sprintf("%s: endpoints[%d]", where, i)
			for _, svc := range svcs {
				checkServiceScrape(svc, ep, pods, ew, p)
			}
		}
	}
}

// checkServiceScrape checks one ServiceMonitor endpoint against a Service.
func checkServiceScrape(svc *corev1.Service, ep scrapeEndpoint, pods []*pod, where string, p *problems) {
	i := slices.IndexFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool { return sp.Name == ep.Port })
	if i < 0 {
		p.addf("%s: Service %s has no port named %q", where, svc.Name, ep.Port)
		return
	}
	tp := svc.Spec.Ports[i].TargetPort
	if tp.Type == intstr.Int && tp.IntVal == 0 {
		tp = intstr.FromInt32(svc.Spec.Ports[i].Port)
	}
	selected, _ := podsSelected(pods, svc.Namespace, &metav1.LabelSelector{MatchLabels: svc.Spec.Selector})
	for _, pd := range selected {
		for _, c := range containers(pd.spec) {
			if n, ok := resolvePort(c, tp); ok {
				checkScrape(pd, n, ep.Path, where, p)
			}
		}
	}
}

// monitorNamespace is the namespace a monitor looks in: its own, or the one
// its namespaceSelector names.
func monitorNamespace(own string, ns *struct {
	MatchNames []string `json:"matchNames,omitempty"`
}) string {
	if ns != nil && len(ns.MatchNames) == 1 {
		return ns.MatchNames[0]
	}
	return own
}

// podPort resolves a named port over all containers of a Pod.
func podPort(pd *pod, name string) (int32, bool) {
	for _, c := range containers(pd.spec) {
		if n, ok := resolvePort(c, intstr.FromString(name)); ok {
			return n, true
		}
	}
	return 0, false
}

// checkNetworkPolicies checks every NetworkPolicy: it selects Pods, each
// port it opens is a port of them, it lets in the traffic the Pod serves
// (Envoy's MCP listener; extproc's gRPC port without Envoy), and in a Pod
// with Envoy it never opens extproc's gRPC port, which only Envoy, over
// loopback, may reach.
func checkNetworkPolicies(r *rendered, pods []*pod, p *problems) {
	for _, np := range r.netPolicies {
		where := fmt.Sprintf("%s: NetworkPolicy %s", r.dir, np.Name)
		selected, err := podsSelected(pods, np.Namespace, &np.Spec.PodSelector)
		if err != nil || len(selected) == 0 {
			p.addf("%s: selects no Deployment's Pods", where)
			continue
		}
		if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
			p.addf("%s: policyTypes lacks Ingress", where)
		}
		for _, pd := range selected {
			checkPolicyPod(np, pd, where, p)
		}
	}
}

// checkPolicyPod checks one NetworkPolicy against one Pod it selects.
func checkPolicyPod(np *networkingv1.NetworkPolicy, pd *pod, where string, p *problems) {
	opens := func(port int32) bool {
		for _, rule := range np.Spec.Ingress {
			if len(rule.Ports) == 0 {
				return true
			}
			for _, rp := range rule.Ports {
				if rp.Port == nil {
					return true
				}
				if n, ok := podPort(pd, rp.Port.String()); ok && rp.Port.Type == intstr.String && n == port {
					return true
				}
				if rp.Port.Type == intstr.Int && rp.Port.IntVal == port {
					return true
				}
			}
		}
		return false
	}
	for _, rule := range np.Spec.Ingress {
		for _, rp := range rule.Ports {
			if rp.Port != nil && rp.Port.Type == intstr.String {
				if _, ok := podPort(pd, rp.Port.StrVal); !ok {
					p.addf("%s: port %q is not a named port of %s", where, rp.Port.StrVal, pd.where)
				}
			}
		}
	}
	switch {
	case pd.envoy != nil && pd.extproc != nil:
		if pd.mcpPort != 0 && !opens(int32(pd.mcpPort)) {
			p.addf("%s: does not let clients reach Envoy's MCP port %d in %s", where, pd.mcpPort, pd.where)
		}
		if opens(pd.extproc.grpcPort) {
			p.addf("%s: opens extproc's gRPC port %d in %s: only Envoy, over loopback, may reach it", where, pd.extproc.grpcPort, pd.where)
		}
	case pd.extproc != nil:
		if !opens(pd.extproc.grpcPort) {
			p.addf("%s: does not let the gateway reach extproc's gRPC port %d in %s", where, pd.extproc.grpcPort, pd.where)
		}
	}
}
