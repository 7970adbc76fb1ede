package deploytest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	localratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/local_ratelimit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/mcp-extproc/mcp-extproc/pkg/processor"
)

// checkDecisionMetadata checks that Envoy keeps the decisions the
// processor writes as dynamic metadata (docs/rules.md): without the
// namespace in receiving_namespaces, Envoy drops them without a word and
// the access log and the filters after ext_proc see nothing.
func checkDecisionMetadata(ep *extprocv3.ExternalProcessor) []error {
	if !slices.Contains(ep.GetMetadataOptions().GetReceivingNamespaces().GetUntyped(), processor.MetadataNamespace) {
		return []error{fmt.Errorf("ext_proc: metadata_options.receiving_namespaces.untyped lacks %q: Envoy would drop the decisions", processor.MetadataNamespace)}
	}
	return nil
}

// checkDecisionConsumers checks what envoy/envoy.yaml shows of the
// decisions: an access log that prints them, and a filter after ext_proc
// keyed on the tool name.
func checkDecisionConsumers(h *hcmv3.HttpConnectionManager) []error {
	var errs []error
	ns := "DYNAMIC_METADATA(" + processor.MetadataNamespace + ":"
	logged := false
	for _, al := range h.GetAccessLog() {
		if strings.Contains(al.GetTypedConfig().String(), ns) {
			logged = true
		}
	}
	if !logged {
		errs = append(errs, fmt.Errorf("access_log: no log line prints %%%s...)%%", ns))
	}
	extProcAt, keyed := -1, false
	for i, f := range h.GetHttpFilters() {
		tc := f.GetTypedConfig()
		switch {
		case tc.MessageIs(&extprocv3.ExternalProcessor{}):
			extProcAt = i
		case tc.MessageIs(&localratelimitv3.LocalRateLimit{}):
			rl := &localratelimitv3.LocalRateLimit{}
			if err := tc.UnmarshalTo(rl); err != nil {
				errs = append(errs, err)
				continue
			}
			for _, r := range rl.GetRateLimits() {
				for _, a := range r.GetActions() {
					if a.GetMetadata().GetMetadataKey().GetKey() == processor.MetadataNamespace {
						keyed = extProcAt >= 0 && i > extProcAt
					}
				}
			}
		}
	}
	if !keyed {
		errs = append(errs, fmt.Errorf("http filters: no local rate limit after ext_proc keyed on %s metadata", processor.MetadataNamespace))
	}
	return errs
}

// TestDecisionChecksFail: the checks above fail on configurations that
// lack what they check.
func TestDecisionChecksFail(t *testing.T) {
	if errs := checkDecisionMetadata(&extprocv3.ExternalProcessor{}); len(errs) != 1 {
		t.Errorf("ext_proc without receiving_namespaces: %v", errs)
	}
	if errs := checkDecisionConsumers(&hcmv3.HttpConnectionManager{}); len(errs) != 2 {
		t.Errorf("HCM without access log and rate limit: %v", errs)
	}
}
