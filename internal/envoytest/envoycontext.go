package envoytest

import (
	"net"
	"slices"
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// What Envoy sends beside the HTTP messages, as its ext_proc filter does
// (source/extensions/filters/http/ext_proc/ext_proc.cc, addDynamicMetadata
// and addAttributes):
//   - metadata_context on every message (headers, body, trailers) of either
//     direction: the namespaces of metadata_options.forwarding_namespaces.untyped
//     that the stream's dynamic metadata has, and nothing else;
//   - attributes once per direction, on the first message Envoy sends in it
//     (the headers, when they are sent), keyed by the filter's name
//     "envoy.filters.http.ext_proc": a Struct of the request_attributes
//     Envoy could evaluate. Attributes it cannot evaluate (no peer
//     certificate on a plaintext connection) are left out.
//   - dynamic_metadata of any reply is written to the stream's dynamic
//     metadata before the reply is acted on (an immediate_response too):
//     each top-level key is a namespace, kept only when it is listed in
//     metadata_options.receiving_namespaces.untyped and its value is a
//     Struct, and merged key by key into what the namespace holds (as
//     StreamInfo::setDynamicMetadata merges). Anything else is dropped
//     silently, as Envoy does; the fake notes it in Result.Notes and
//     Result.DroppedMetadata.
// Response attributes are not modelled. Without forwarding namespaces Envoy
// still sends an empty metadata_context; the fake leaves it unset, which
// reads the same.

// Forwarding is the part of the filter configuration that forwards
// metadata and attributes.
type Forwarding struct {
	// MetadataNamespaces is metadata_options.forwarding_namespaces.untyped.
	MetadataNamespaces []string
	// RequestAttributes is request_attributes (e.g.
	// "connection.uri_san_peer_certificate").
	RequestAttributes []string
	// ReceivingNamespaces is metadata_options.receiving_namespaces.untyped:
	// the namespaces the server may write dynamic metadata to. Empty: none.
	ReceivingNamespaces []string
}

// StreamInfo is what Envoy knows of a request besides its headers.
type StreamInfo struct {
	// DynamicMetadata is the stream's dynamic metadata by namespace, as
	// earlier filters left it (jwt_authn's payload_in_metadata under
	// "envoy.filters.http.jwt_authn").
	DynamicMetadata map[string]*structpb.Struct
	// Attributes are the values of the attributes Envoy can evaluate for
	// this request, by name ("connection.uri_san_peer_certificate").
	Attributes map[string]*structpb.Value
}

// connectionInfo is what the Proxy knows of a request: the downstream
// connection's remote address (http.Request.RemoteAddr) as Envoy's
// attributes source.address ("ip:port") and source.port. Sent only when
// the filter's request_attributes lists them, as every attribute.
func connectionInfo(remote string) *StreamInfo {
	info := &StreamInfo{Attributes: map[string]*structpb.Value{}}
	if remote == "" {
		return info
	}
	info.Attributes["source.address"] = structpb.NewStringValue(remote)
	if _, port, err := net.SplitHostPort(remote); err == nil {
		if n, err := strconv.Atoi(port); err == nil {
			info.Attributes["source.port"] = structpb.NewNumberValue(float64(n))
		}
	}
	return info
}

// AttributesKey is the key of ProcessingRequest.attributes: the filter name.
const AttributesKey = "envoy.filters.http.ext_proc"

// envoyContext is one exchange's state for metadata and attributes.
type envoyContext struct {
	info        *StreamInfo
	requestSent bool // request attributes went out
}

// add sets metadata_context and, on the first request-direction message,
// attributes on m, as Forwarding asks.
func (e *envoyContext) add(f *Forwarding, m *extprocv3.ProcessingRequest) {
	if e.info == nil {
		return
	}
	if len(f.MetadataNamespaces) > 0 {
		md := &corev3.Metadata{}
		for _, ns := range f.MetadataNamespaces {
			if s, ok := e.info.DynamicMetadata[ns]; ok {
				if md.FilterMetadata == nil {
					md.FilterMetadata = map[string]*structpb.Struct{}
				}
				md.FilterMetadata[ns] = proto.Clone(s).(*structpb.Struct)
			}
		}
		m.MetadataContext = md
	}
	if !isRequestMessage(m) || e.requestSent || len(f.RequestAttributes) == 0 {
		return
	}
	e.requestSent = true
	attrs := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for _, a := range f.RequestAttributes {
		if v, ok := e.info.Attributes[a]; ok {
			attrs.Fields[a] = proto.Clone(v).(*structpb.Value)
		}
	}
	m.Attributes = map[string]*structpb.Struct{AttributesKey: attrs}
}

func isRequestMessage(m *extprocv3.ProcessingRequest) bool {
	switch m.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders, *extprocv3.ProcessingRequest_RequestBody,
		*extprocv3.ProcessingRequest_RequestTrailers:
		return true
	}
	return false
}

// receive writes the dynamic metadata of a reply, as Envoy does, into
// res.DynamicMetadata.
func (e *envoyContext) receive(f *Forwarding, r *extprocv3.ProcessingResponse, res *Result) {
	md := r.GetDynamicMetadata()
	if md == nil {
		return
	}
	for ns, v := range md.GetFields() {
		s := v.GetStructValue()
		switch {
		case !slices.Contains(f.ReceivingNamespaces, ns):
			res.DroppedMetadata = append(res.DroppedMetadata, ns)
			res.note("dynamic metadata namespace %q dropped: not in metadata_options.receiving_namespaces.untyped", ns)
			continue
		case s == nil:
			res.DroppedMetadata = append(res.DroppedMetadata, ns)
			res.note("dynamic metadata namespace %q dropped: not a Struct", ns)
			continue
		}
		if res.DynamicMetadata == nil {
			res.DynamicMetadata = map[string]*structpb.Struct{}
		}
		cur := res.DynamicMetadata[ns]
		if cur == nil {
			cur = &structpb.Struct{Fields: map[string]*structpb.Value{}}
			res.DynamicMetadata[ns] = cur
		}
		for k, fv := range s.GetFields() {
			cur.Fields[k] = proto.Clone(fv).(*structpb.Value)
		}
	}
}
