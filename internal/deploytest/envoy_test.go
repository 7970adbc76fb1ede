package deploytest

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	healthcheckv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/health_check/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"sigs.k8s.io/yaml"

	// Registered for the "@type"s the bootstrap and the EnvoyFilter use; a
	// type that is not registered here fails to decode.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/local_ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/downstream_connections/v3"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
)

// Filter and extension names the checks look for.
const (
	extProcFilter     = "envoy.filters.http.ext_proc"
	routerFilter      = "envoy.filters.http.router"
	healthCheckFilter = "envoy.filters.http.health_check"
	httpProtocolOpts  = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
	defaultBufferSize = 1 << 20 // Envoy's per_connection_buffer_limit_bytes default
)

// decodeProtoYAML decodes YAML into m the way Envoy reads it: YAML to JSON,
// then protojson, strict (an unknown field or an unresolvable "@type" is an
// error), then the protoc-gen-validate rules on m and on everything packed
// in an Any inside it.
func decodeProtoYAML(data []byte, m proto.Message) error {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return fmt.Errorf("yaml: %w", err)
	}
	return decodeProtoJSON(js, m)
}

func decodeProtoJSON(js []byte, m proto.Message) error {
	if err := protojson.Unmarshal(js, m); err != nil {
		return fmt.Errorf("decode %s: %w", m.ProtoReflect().Descriptor().FullName(), err)
	}
	return validateDeep(m)
}

// validateDeep runs ValidateAll on m and, since ValidateAll does not look
// inside an Any, on every message packed in an Any below it, recursively.
func validateDeep(m proto.Message) error {
	var errs []error
	validate := func(m proto.Message, where string) {
		if v, ok := m.(interface{ ValidateAll() error }); ok {
			if err := v.ValidateAll(); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
			}
		}
	}
	var visit func(m protoreflect.Message, where string)
	visit = func(m protoreflect.Message, where string) {
		if a, ok := m.Interface().(*anypb.Any); ok {
			inner, err := a.UnmarshalNew()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
				return
			}
			validate(inner, where+"("+a.GetTypeUrl()+")")
			visit(inner.ProtoReflect(), where)
			return
		}
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			p := where + "." + string(fd.Name())
			switch {
			case fd.IsMap():
				if fd.MapValue().Message() != nil {
					v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
						visit(mv.Message(), p+"["+k.String()+"]")
						return true
					})
				}
			case fd.IsList():
				if fd.Message() != nil {
					for i := range v.List().Len() {
						visit(v.List().Get(i).Message(), p+"["+strconv.Itoa(i)+"]")
					}
				}
			case fd.Message() != nil:
				visit(v.Message(), p)
			}
			return true
		})
	}
	name := string(m.ProtoReflect().Descriptor().Name())
	validate(m, name)
	visit(m.ProtoReflect(), name)
	return errors.Join(errs...)
}

// hostPort is a socket address of an Envoy config.
type hostPort struct {
	host string
	port uint32
}

func (h hostPort) String() string {
	return net.JoinHostPort(h.host, strconv.FormatUint(uint64(h.port), 10))
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// bootstrapFacts are what the manifests must agree with.
type bootstrapFacts struct {
	decoded         bool     // the file decoded and validated; the rest is meaningful
	mcpPort         uint32   // the listener with the ext_proc filter
	readyPort       uint32   // the listener answering health checks
	readyPath       string   // its path
	extproc         hostPort // the ext_proc cluster's endpoint
	upstreams       []hostPort
	upstreamHCPaths []string // active HTTP health check paths of the upstreams
	stats           statsEndpoint
}

// extProcLimits are the values of the plugin configuration the ext_proc
// filter must agree with.
type extProcLimits struct {
	hookTimeout  time.Duration
	maxBodyBytes int64
	isMCPPath    func(string) bool
	identity     *config.Identity // what Envoy must forward (identity_test.go)
	mcpNamespace string           // extproc.mcp_filter_namespace, "" off (mcpfilter_test.go)
}

func limitsOf(cfg *config.Config) extProcLimits {
	return extProcLimits{
		hookTimeout:  cfg.HookTimeout(),
		maxBodyBytes: cfg.Extproc.MaxBodyBytes,
		isMCPPath:    cfg.Extproc.IsMCPPath,
		identity:     cfg.Extproc.Identity,
		mcpNamespace: cfg.Extproc.MCPFilterMetadata(),
	}
}

// checkExtProc checks an ext_proc filter configuration against what the
// processor needs (extproc-contract.md §3, §7) and returns its message
// timeout and gRPC cluster.
func checkExtProc(ep *extprocv3.ExternalProcessor, lim extProcLimits) (msgTimeout time.Duration, cluster string, errs []error) {
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if ep.GetHttpService() != nil {
		bad("ext_proc: http_service cannot send bodies; use grpc_service")
	}
	cluster = ep.GetGrpcService().GetEnvoyGrpc().GetClusterName()
	if cluster == "" {
		bad("ext_proc: grpc_service.envoy_grpc.cluster_name is not set")
	}
	if ep.GetFailureModeAllow() {
		bad("ext_proc: failure_mode_allow must be false (fail closed)")
	}
	if !ep.GetAllowModeOverride() {
		bad("ext_proc: allow_mode_override must be true: the processor asks for bodies with mode_override")
	}
	if ep.GetSendBodyWithoutWaitingForHeaderResponse() {
		bad("ext_proc: send_body_without_waiting_for_header_response must be false: it makes Envoy ignore mode_override")
	}
	if len(ep.GetAllowedOverrideModes()) > 0 {
		bad("ext_proc: allowed_override_modes would refuse some of the processor's mode_override choices")
	}
	if ep.GetObservabilityMode() {
		bad("ext_proc: observability_mode must be false: the processor's replies must be applied")
	}
	if ep.GetDisableImmediateResponse() {
		bad("ext_proc: disable_immediate_response must be false: blocking answers with an ImmediateResponse")
	}
	if ep.GetMutationRules().GetDisallowAll().GetValue() {
		bad("ext_proc: mutation_rules.disallow_all forbids the content-length updates the processor makes")
	}
	pm := ep.GetProcessingMode()
	if pm == nil {
		bad("ext_proc: processing_mode is not set")
	}
	if m := pm.GetRequestHeaderMode(); m != extprocv3.ProcessingMode_SEND {
		bad("ext_proc: processing_mode.request_header_mode is %s, want SEND", m)
	}
	if m := pm.GetResponseHeaderMode(); m != extprocv3.ProcessingMode_SEND {
		bad("ext_proc: processing_mode.response_header_mode is %s, want SEND", m)
	}
	if m := pm.GetRequestBodyMode(); m != extprocv3.ProcessingMode_NONE {
		bad("ext_proc: processing_mode.request_body_mode is %s, want NONE (the processor opts in with mode_override)", m)
	}
	if m := pm.GetResponseBodyMode(); m != extprocv3.ProcessingMode_NONE {
		bad("ext_proc: processing_mode.response_body_mode is %s, want NONE (the processor opts in with mode_override)", m)
	}
	if m := pm.GetRequestTrailerMode(); m != extprocv3.ProcessingMode_SKIP {
		bad("ext_proc: processing_mode.request_trailer_mode is %s, want SKIP", m)
	}
	if m := pm.GetResponseTrailerMode(); m != extprocv3.ProcessingMode_SKIP {
		bad("ext_proc: processing_mode.response_trailer_mode is %s, want SKIP", m)
	}
	msgTimeout = 200 * time.Millisecond // Envoy's default
	if ep.GetMessageTimeout() != nil {
		msgTimeout = ep.GetMessageTimeout().AsDuration()
	}
	if msgTimeout <= lim.hookTimeout {
		bad("ext_proc: message_timeout %v must exceed extproc.hook_timeout %v, or Envoy answers 504 before the plugins decide",
			msgTimeout, lim.hookTimeout)
	}
	if mx := ep.GetMaxMessageTimeout(); mx != nil && mx.AsDuration() != 0 && mx.AsDuration() < msgTimeout {
		bad("ext_proc: max_message_timeout %v is below message_timeout %v", mx.AsDuration(), msgTimeout)
	}
	return msgTimeout, cluster, errs
}

// checkHTTP2Cluster checks that a cluster speaks HTTP/2 (gRPC needs it).
func checkHTTP2Cluster(c *clusterv3.Cluster) error {
	any, ok := c.GetTypedExtensionProtocolOptions()[httpProtocolOpts]
	if !ok {
		return fmt.Errorf("cluster %s: no typed_extension_protocol_options[%s]: gRPC needs HTTP/2", c.GetName(), httpProtocolOpts)
	}
	var opts upstreamhttpv3.HttpProtocolOptions
	if err := any.UnmarshalTo(&opts); err != nil {
		return fmt.Errorf("cluster %s: %s: %w", c.GetName(), httpProtocolOpts, err)
	}
	if opts.GetExplicitHttpConfig().GetHttp2ProtocolOptions() == nil {
		return fmt.Errorf("cluster %s: %s has no explicit_http_config.http2_protocol_options: gRPC needs HTTP/2", c.GetName(), httpProtocolOpts)
	}
	return nil
}

// clusterEndpoints lists the socket addresses of a cluster.
func clusterEndpoints(c *clusterv3.Cluster) []hostPort {
	var out []hostPort
	for _, le := range c.GetLoadAssignment().GetEndpoints() {
		for _, lb := range le.GetLbEndpoints() {
			sa := lb.GetEndpoint().GetAddress().GetSocketAddress()
			out = append(out, hostPort{host: sa.GetAddress(), port: sa.GetPortValue()})
		}
	}
	return out
}

// hcmOf returns the HTTP connection manager of a listener, if it has one.
func hcmOf(l *listenerv3.Listener) (*hcmv3.HttpConnectionManager, error) {
	for _, fc := range l.GetFilterChains() {
		for _, f := range fc.GetFilters() {
			if tc := f.GetTypedConfig(); tc != nil && tc.MessageIs(&hcmv3.HttpConnectionManager{}) {
				h := &hcmv3.HttpConnectionManager{}
				if err := tc.UnmarshalTo(h); err != nil {
					return nil, fmt.Errorf("listener %s: %w", l.GetName(), err)
				}
				return h, nil
			}
		}
	}
	return nil, nil
}

// extProcOf returns the ext_proc filter of an HCM and checks the filter
// order (ext_proc before the router, the router last).
func extProcOf(h *hcmv3.HttpConnectionManager) (*extprocv3.ExternalProcessor, error) {
	filters := h.GetHttpFilters()
	var ep *extprocv3.ExternalProcessor
	epAt, routerAt := -1, -1
	for i, f := range filters {
		switch tc := f.GetTypedConfig(); {
		case tc.MessageIs(&extprocv3.ExternalProcessor{}):
			ep = &extprocv3.ExternalProcessor{}
			if err := tc.UnmarshalTo(ep); err != nil {
				return nil, err
			}
			epAt = i
		case f.GetName() == routerFilter && routerAt < 0:
			routerAt = i
		}
	}
	if ep == nil {
		return nil, nil
	}
	if routerAt != len(filters)-1 {
		return ep, fmt.Errorf("http filters: the router must be the last filter")
	}
	if epAt > routerAt {
		return ep, fmt.Errorf("http filters: ext_proc must come before the router")
	}
	return ep, nil
}

// extProcDisabled reports whether a per-filter config map turns ext_proc off.
func extProcDisabled(perFilter map[string]*anypb.Any) (bool, error) {
	a, ok := perFilter[extProcFilter]
	if !ok {
		return false, nil
	}
	var pr extprocv3.ExtProcPerRoute
	if err := a.UnmarshalTo(&pr); err != nil {
		return false, fmt.Errorf("typed_per_filter_config[%s]: %w", extProcFilter, err)
	}
	return pr.GetDisabled(), nil
}

// checkBootstrap checks the sidecar bootstrap against the processor's needs
// and the plugin configuration, and returns the facts the Pod must agree with.
func checkBootstrap(data []byte, lim extProcLimits) (bootstrapFacts, []error) {
	var facts bootstrapFacts
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	bs := &bootstrapv3.Bootstrap{}
	if err := decodeProtoYAML(data, bs); err != nil {
		return facts, []error{err}
	}
	facts.decoded = true
	if a := bs.GetAdmin().GetAddress().GetSocketAddress().GetAddress(); a != "" && !isLoopback(a) {
		bad("admin is bound to %s: bind it to 127.0.0.1", a)
	}

	clusters := map[string]*clusterv3.Cluster{}
	for _, c := range bs.GetStaticResources().GetClusters() {
		clusters[c.GetName()] = c
	}
	admin := bs.GetAdmin().GetAddress().GetSocketAddress()
	sc := statsCheck{admin: hostPort{host: admin.GetAddress(), port: admin.GetPortValue()}, clusters: clusters}

	var msgTimeout time.Duration
	extprocCluster := ""
	upstreamNames := map[string]bool{}
	nExtProc := 0
	for _, l := range bs.GetStaticResources().GetListeners() {
		h, err := hcmOf(l)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if h == nil {
			continue
		}
		port := l.GetAddress().GetSocketAddress().GetPortValue()
		ep, err := extProcOf(h)
		if err != nil {
			bad("listener %s: %v", l.GetName(), err)
		}
		if ep == nil {
			if path, ok := healthCheckPath(h); ok {
				facts.readyPort, facts.readyPath = port, path
				continue
			}
			if sc.isStatsListener(h) {
				errs = append(errs, sc.check(l, h)...)
				continue
			}
			if len(routedClusters(h)) > 0 {
				bad("listener %s routes to upstreams without the ext_proc filter", l.GetName())
			}
			continue
		}
		nExtProc++
		facts.mcpPort = port
		var epErrs []error
		msgTimeout, extprocCluster, epErrs = checkExtProc(ep, lim)
		errs = append(errs, epErrs...)
		if removed, err := removedBefore(h); err != nil {
			bad("listener %s: %v", l.GetName(), err)
		} else {
			errs = append(errs, checkIdentityForwarding(ep, removed, lim.identity)...)
		}
		errs = append(errs, checkDecisionMetadata(ep)...)
		errs = append(errs, checkMCPFilter(bs, h, ep, lim)...)
		errs = append(errs, checkDecisionConsumers(h)...)

		limit := uint64(defaultBufferSize)
		if v := l.GetPerConnectionBufferLimitBytes(); v != nil {
			limit = uint64(v.GetValue())
		}
		if lim.maxBodyBytes > 0 && uint64(lim.maxBodyBytes) > limit {
			bad("listener %s: per_connection_buffer_limit_bytes %d is below extproc.max_body_bytes %d: Envoy would refuse bodies the processor buffers",
				l.GetName(), limit, lim.maxBodyBytes)
		}
		if d := h.GetRequestTimeout(); d != nil && d.AsDuration() != 0 {
			bad("listener %s: request_timeout %v would cut long MCP streams", l.GetName(), d.AsDuration())
		}
		if d := h.GetStreamIdleTimeout(); d != nil && d.AsDuration() != 0 && d.AsDuration() <= msgTimeout {
			bad("listener %s: stream_idle_timeout %v must exceed message_timeout %v", l.GetName(), d.AsDuration(), msgTimeout)
		}
		errs = append(errs, checkRoutes(l.GetName(), h, msgTimeout, lim, upstreamNames)...)
	}
	if nExtProc != 1 {
		bad("want exactly one listener with the %s filter, found %d", extProcFilter, nExtProc)
	}
	facts.stats, errs = sc.result(errs)
	if facts.readyPort == 0 {
		bad("no listener answers health checks (%s) for the kubelet's readiness probe", healthCheckFilter)
	}

	if extprocCluster != "" {
		c, ok := clusters[extprocCluster]
		if !ok {
			bad("ext_proc cluster %q is not defined", extprocCluster)
		} else {
			if err := checkHTTP2Cluster(c); err != nil {
				errs = append(errs, err)
			}
			eps := clusterEndpoints(c)
			if len(eps) != 1 {
				bad("cluster %s: want one endpoint (the sidecar), found %d", extprocCluster, len(eps))
			} else {
				facts.extproc = eps[0]
				if !isLoopback(eps[0].host) {
					bad("cluster %s: endpoint %s is not on loopback: the sidecar is in the same Pod", extprocCluster, eps[0])
				}
			}
		}
	}
	for name := range upstreamNames {
		c, ok := clusters[name]
		if !ok {
			bad("route cluster %q is not defined", name)
			continue
		}
		facts.upstreams = append(facts.upstreams, clusterEndpoints(c)...)
		for _, hc := range c.GetHealthChecks() {
			if p := hc.GetHttpHealthCheck().GetPath(); p != "" {
				facts.upstreamHCPaths = append(facts.upstreamHCPaths, p)
			}
		}
	}
	return facts, errs
}

// healthCheckPath returns the path the health_check filter of h answers.
func healthCheckPath(h *hcmv3.HttpConnectionManager) (string, bool) {
	for _, f := range h.GetHttpFilters() {
		var hc healthcheckv3.HealthCheck
		if tc := f.GetTypedConfig(); tc == nil || !tc.MessageIs(&hc) || tc.UnmarshalTo(&hc) != nil {
			continue
		}
		if hc.GetPassThroughMode().GetValue() {
			continue
		}
		for _, m := range hc.GetHeaders() {
			if m.GetName() == ":path" {
				return m.GetStringMatch().GetExact(), true
			}
		}
	}
	return "", false
}

// routedClusters lists the clusters the routes of h send traffic to.
func routedClusters(h *hcmv3.HttpConnectionManager) []string {
	var out []string
	for _, vh := range h.GetRouteConfig().GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			if c := r.GetRoute().GetCluster(); c != "" {
				out = append(out, c)
			}
		}
	}
	return out
}

// checkRoutes checks every route that reaches an upstream: only MCP paths
// (or their traffic would pass uninspected), ext_proc not disabled, no route
// timeout, an idle timeout above the message timeout.
func checkRoutes(listener string, h *hcmv3.HttpConnectionManager, msgTimeout time.Duration, lim extProcLimits, upstreams map[string]bool) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if h.GetRouteConfig() == nil {
		return []error{fmt.Errorf("listener %s: no inline route_config", listener)}
	}
	for _, vh := range h.GetRouteConfig().GetVirtualHosts() {
		vhOff, err := extProcDisabled(vh.GetTypedPerFilterConfig())
		if err != nil {
			errs = append(errs, err)
		}
		for i, r := range vh.GetRoutes() {
			ra := r.GetRoute()
			if ra == nil {
				continue // direct response or redirect: nothing reaches the server
			}
			where := fmt.Sprintf("listener %s: virtual host %s: route %d", listener, vh.GetName(), i)
			if ra.GetCluster() == "" {
				bad("%s: only a fixed cluster is supported", where)
			} else {
				upstreams[ra.GetCluster()] = true
			}
			off, err := extProcDisabled(r.GetTypedPerFilterConfig())
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
			}
			if off || vhOff {
				bad("%s: reaches %s with ext_proc disabled: MCP traffic would pass uninspected", where, ra.GetCluster())
			}
			switch m := r.GetMatch().GetPathSpecifier().(type) {
			case *routev3.RouteMatch_Path:
				if lim.isMCPPath != nil && !lim.isMCPPath(m.Path) {
					bad("%s: path %s reaches the server but is not in extproc.mcp_paths: it would pass uninspected", where, m.Path)
				}
			default:
				bad("%s: match it by exact path (one of extproc.mcp_paths), not %T: other paths would pass uninspected", where, m)
			}
			if d := ra.GetTimeout(); d == nil || d.AsDuration() != 0 {
				got := "unset (15 s default)"
				if d != nil {
					got = d.AsDuration().String()
				}
				bad("%s: route timeout is %s, want 0s: long SSE tool calls would be cut", where, got)
			}
			if d := ra.GetIdleTimeout(); d == nil || d.AsDuration() <= msgTimeout {
				bad("%s: route idle_timeout must be set above message_timeout %v", where, msgTimeout)
			}
		}
	}
	return errs
}
