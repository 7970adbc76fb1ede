package deploytest

import (
	"fmt"
	"slices"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	mcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/mcp/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
)

// The runtime feature that names the MCP filter's metadata namespace after
// the filter, and the two names.
const (
	mcpNamespaceFeature = "envoy.reloadable_features.mcp_filter_use_new_metadata_namespace"
	mcpNamespace        = "envoy.filters.http.mcp"
	mcpLegacyNamespace  = "mcp_proxy"
)

// checkMCPFilter checks Envoy's MCP filter (envoy.filters.http.mcp) when
// the chain has one: before ext_proc (after it, the processor would not
// get its metadata), max_request_body_size at least extproc.max_body_bytes
// (the filter lowers the stream's buffer limit to it: bigger bodies would
// be a 413 at ext_proc's BUFFERED read), its namespace forwarded, and the
// namespace the one the processor reads (wantNS, "" when off).
func checkMCPFilter(bs *bootstrapv3.Bootstrap, h *hcmv3.HttpConnectionManager, ep *extprocv3.ExternalProcessor, lim extProcLimits) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	mcpAt, extProcAt := -1, -1
	var mcp mcpv3.Mcp
	for i, f := range h.GetHttpFilters() {
		switch tc := f.GetTypedConfig(); {
		case tc.MessageIs(&mcp):
			if err := tc.UnmarshalTo(&mcp); err != nil {
				return []error{fmt.Errorf("%s: %w", f.GetName(), err)}
			}
			mcpAt = i
		case tc.MessageIs(&extprocv3.ExternalProcessor{}):
			extProcAt = i
		}
	}
	if mcpAt < 0 {
		return nil
	}
	if mcpAt > extProcAt {
		bad("envoy.filters.http.mcp is after ext_proc: the processor never gets its metadata")
	}
	size := int64(8192)
	if v := mcp.GetMaxRequestBodySize(); v != nil {
		size = int64(v.GetValue())
	}
	if size != 0 && lim.maxBodyBytes > size {
		bad("envoy.filters.http.mcp max_request_body_size %d is below extproc.max_body_bytes %d: the filter lowers the buffer limit, and ext_proc's read of a larger body would be a 413", size, lim.maxBodyBytes)
	}
	if lim.mcpNamespace == "" {
		return errs
	}
	ns := mcpLegacyNamespace
	if runtimeTrue(bs, mcpNamespaceFeature) {
		ns = mcpNamespace
	}
	if ns != lim.mcpNamespace {
		bad("envoy.filters.http.mcp writes to %q (runtime %s), the processor reads extproc.mcp_filter_namespace %q", ns, mcpNamespaceFeature, lim.mcpNamespace)
	}
	if !slices.Contains(ep.GetMetadataOptions().GetForwardingNamespaces().GetUntyped(), ns) {
		bad("ext_proc: metadata_options.forwarding_namespaces.untyped lacks %q: the processor never sees the method Envoy's MCP filter read", ns)
	}
	return errs
}

// runtimeTrue reports whether a static layer of bs sets key to true.
func runtimeTrue(bs *bootstrapv3.Bootstrap, key string) bool {
	on := false
	for _, l := range bs.GetLayeredRuntime().GetLayers() {
		if v, ok := l.GetStaticLayer().GetFields()[key]; ok {
			on = v.GetBoolValue()
		}
	}
	return on
}
