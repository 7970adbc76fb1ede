package envoytest

import (
	"net/http"
	"slices"
	"testing"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

func TestMetadataAndAttributes(t *testing.T) {
	jwt, _ := structpb.NewStruct(map[string]any{"jwt_payload": map[string]any{"sub": "alice"}})
	other, _ := structpb.NewStruct(map[string]any{"x": "y"})
	info := StreamInfo{
		DynamicMetadata: map[string]*structpb.Struct{"envoy.filters.http.jwt_authn": jwt, "other": other},
		Attributes: map[string]*structpb.Value{
			"connection.uri_san_peer_certificate": structpb.NewStringValue("spiffe://td/w"),
			"source.address":                      structpb.NewStringValue("10.0.0.1:5555"),
		},
	}
	req := func() *Request {
		return &Request{Method: http.MethodPost, Path: "/mcp", Body: [][]byte{[]byte("{}")}, Info: info}
	}
	mode := bothBodies(filterv3.ProcessingMode_BUFFERED, filterv3.ProcessingMode_BUFFERED)
	fwd := Forwarding{
		MetadataNamespaces: []string{"envoy.filters.http.jwt_authn", "absent"},
		RequestAttributes:  []string{"connection.uri_san_peer_certificate", "connection.dns_san_peer_certificate"},
	}
	res := do(t, Filter{Mode: mode, Forwarding: fwd}, passAll, req(), canned(200, jsonHeaders("{}"), "{}"))
	if len(res.Sent) != 4 {
		t.Fatalf("sent %v", summary(res.Sent))
	}
	for i, m := range res.Sent {
		md := m.GetMetadataContext().GetFilterMetadata()
		if len(md) != 1 || md["envoy.filters.http.jwt_authn"].GetFields()["jwt_payload"].GetStructValue().GetFields()["sub"].GetStringValue() != "alice" {
			t.Errorf("message %d: metadata %v, want only the jwt_authn namespace", i, md)
		}
		attrs := m.GetAttributes()
		if _, ok := m.GetRequest().(*extprocv3.ProcessingRequest_RequestHeaders); !ok {
			if attrs != nil {
				t.Errorf("message %d (%T): attributes %v, want them on the request headers only", i, m.GetRequest(), attrs)
			}
			continue
		}
		a := attrs[AttributesKey].GetFields()
		if len(attrs) != 1 || len(a) != 1 || a["connection.uri_san_peer_certificate"].GetStringValue() != "spiffe://td/w" {
			t.Errorf("request headers: attributes %v, want the peer id alone", attrs)
		}
	}

	res = do(t, Filter{Mode: mode}, passAll, req(), canned(200, jsonHeaders("{}"), "{}"))
	for i, m := range res.Sent {
		if m.GetMetadataContext() != nil || m.GetAttributes() != nil {
			t.Errorf("message %d: nothing asked, sent metadata %v attributes %v", i, m.GetMetadataContext(), m.GetAttributes())
		}
	}
}

func TestReceivedMetadataOnlyInReceivingNamespaces(t *testing.T) {
	decision := &structpb.Struct{Fields: map[string]*structpb.Value{"decision": structpb.NewStringValue("blocked")}}
	later := &structpb.Struct{Fields: map[string]*structpb.Value{"name": structpb.NewStringValue("echo")}}
	var e envoyContext
	res := &Result{}
	e.receive(&Forwarding{ReceivingNamespaces: []string{"mcp_extproc"}}, &extprocv3.ProcessingResponse{DynamicMetadata: &structpb.Struct{Fields: map[string]*structpb.Value{
		"mcp_extproc": structpb.NewStructValue(decision),
		"elsewhere":   structpb.NewStructValue(decision),
		"scalar":      structpb.NewStringValue("x"),
	}}}, res)
	e.receive(&Forwarding{ReceivingNamespaces: []string{"mcp_extproc", "scalar"}}, &extprocv3.ProcessingResponse{DynamicMetadata: &structpb.Struct{Fields: map[string]*structpb.Value{
		"mcp_extproc": structpb.NewStructValue(later),
		"scalar":      structpb.NewStringValue("x"),
	}}}, res)
	got := res.DynamicMetadata["mcp_extproc"].AsMap()
	if got["decision"] != "blocked" || got["name"] != "echo" {
		t.Errorf("mcp_extproc = %v, want both writes merged", got)
	}
	if len(res.DynamicMetadata) != 1 {
		t.Errorf("namespaces kept = %v, want only mcp_extproc", res.DynamicMetadata)
	}
	slices.Sort(res.DroppedMetadata)
	if want := []string{"elsewhere", "scalar", "scalar"}; !slices.Equal(res.DroppedMetadata, want) {
		t.Errorf("dropped = %v, want %v", res.DroppedMetadata, want)
	}
}

// TestConnectionInfo: the Proxy's requests carry the downstream peer as
// Envoy's source.address and source.port attributes.
func TestConnectionInfo(t *testing.T) {
	for _, tc := range []struct {
		remote, addr string
		port         float64
		hasPort      bool
	}{
		{remote: "127.0.0.1:41000", addr: "127.0.0.1:41000", port: 41000, hasPort: true},
		{remote: "[::1]:8080", addr: "[::1]:8080", port: 8080, hasPort: true},
		{remote: "@", addr: "@"},
		{remote: ""},
	} {
		a := connectionInfo(tc.remote).Attributes
		if got := a["source.address"].GetStringValue(); got != tc.addr {
			t.Errorf("%q: source.address %q, want %q", tc.remote, got, tc.addr)
		}
		p, ok := a["source.port"]
		if ok != tc.hasPort || p.GetNumberValue() != tc.port {
			t.Errorf("%q: source.port %v, want %v", tc.remote, p, tc.port)
		}
	}
}
