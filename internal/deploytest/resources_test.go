package deploytest

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// scrapeEndpoint is one endpoint of a PodMonitor or a ServiceMonitor (the
// Prometheus Operator's monitoring.coreos.com/v1), the fields the manifests
// may use.
type scrapeEndpoint struct {
	Port          string `json:"port,omitempty"`
	Path          string `json:"path,omitempty"`
	Scheme        string `json:"scheme,omitempty"`
	Interval      string `json:"interval,omitempty"`
	ScrapeTimeout string `json:"scrapeTimeout,omitempty"`
	HonorLabels   bool   `json:"honorLabels,omitempty"`
}

// podMonitor is the Prometheus Operator's PodMonitor, decoded strictly.
type podMonitor struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector *struct {
			MatchNames []string `json:"matchNames,omitempty"`
		} `json:"namespaceSelector,omitempty"`
		PodMetricsEndpoints []scrapeEndpoint `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

// serviceMonitor is the Prometheus Operator's ServiceMonitor, decoded
// strictly.
type serviceMonitor struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector *struct {
			MatchNames []string `json:"matchNames,omitempty"`
		} `json:"namespaceSelector,omitempty"`
		Endpoints []scrapeEndpoint `json:"endpoints"`
	} `json:"spec"`
}

// add decodes one resource (JSON) strictly into its type and files it
// under r. gvk is "apiVersion kind".
func (r *rendered) add(where, gvk string, js []byte) []error {
	var target any
	switch gvk {
	case "apps/v1 Deployment":
		target = appendNew(&r.deployments)
	case "v1 Service":
		target = appendNew(&r.services)
	case "v1 ConfigMap":
		target = appendNew(&r.configMaps)
	case "v1 Namespace":
		target = appendNew(&r.namespaces)
	case "policy/v1 PodDisruptionBudget":
		target = appendNew(&r.pdbs)
	case "networking.k8s.io/v1 NetworkPolicy":
		target = appendNew(&r.netPolicies)
	case "networking.istio.io/v1alpha3 EnvoyFilter":
		target = appendNew(&r.envoyFilters)
	case "networking.istio.io/v1 DestinationRule":
		target = appendNew(&r.destRules)
	case "monitoring.coreos.com/v1 PrometheusRule":
		target = appendNew(&r.rules)
	case "monitoring.coreos.com/v1 PodMonitor":
		target = appendNew(&r.podMonitors)
	case "monitoring.coreos.com/v1 ServiceMonitor":
		target = appendNew(&r.svcMonitors)
	default:
		return []error{fmt.Errorf("%s: unexpected kind %q (add its strict decoding to the checks)", where, gvk)}
	}
	if err := decodeStrict(js, target); err != nil {
		return []error{fmt.Errorf("%s: %w", where, err)}
	}
	return nil
}

// appendNew appends a new zero T to *list and returns it.
func appendNew[T any](list *[]*T) *T {
	v := new(T)
	*list = append(*list, v)
	return v
}
