package processor

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

func envoyContext(t testing.TB) (*corev3.Metadata, map[string]*structpb.Struct) {
	jwt, err := structpb.NewStruct(map[string]any{"jwt_payload": map[string]any{"sub": "alice", "roles": []any{"dev"}}})
	if err != nil {
		t.Fatal(err)
	}
	attrs, err := structpb.NewStruct(map[string]any{"source.address": "10.0.0.1:5000"})
	if err != nil {
		t.Fatal(err)
	}
	return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"envoy.filters.http.jwt_authn": jwt}},
		map[string]*structpb.Struct{"envoy.filters.http.ext_proc": attrs}
}

// TestCodecKeepsEnvoyContextOnRequestHeaders: the request headers keep
// metadata_context and attributes; every other message is decoded whole but
// for them.
func TestCodecKeepsEnvoyContextOnRequestHeaders(t *testing.T) {
	md, attrs := envoyContext(t)
	headers := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{
		Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{{Key: ":path", RawValue: []byte("/mcp")}}}}},
		MetadataContext: md, Attributes: attrs}
	body := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{
		Body: []byte(`{"jsonrpc":"2.0"}`), EndOfStream: true}}, MetadataContext: md, Attributes: attrs, ObservabilityMode: true}
	c := NewCodec()
	for _, tc := range []struct {
		name string
		in   *extprocv3.ProcessingRequest
		want *extprocv3.ProcessingRequest
	}{
		{"request headers", headers, headers},
		{"request body", body, &extprocv3.ProcessingRequest{Request: body.Request, ObservabilityMode: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := proto.Marshal(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			got := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{}} // reset by Unmarshal
			if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, got); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, tc.want) {
				t.Errorf("decoded %v, want %v", got, tc.want)
			}
		})
	}
	if c.Name() != "proto" {
		t.Errorf("codec name %q, want proto", c.Name())
	}
}

// FuzzCodec: whatever bytes arrive, the codec decodes what proto decodes
// from the same bytes without the Envoy context of a message that has no
// request headers, and fails exactly when that fails: the fields it leaves
// out are not read, so their contents cannot fail it.
func FuzzCodec(f *testing.F) {
	md, attrs := envoyContext(f)
	for _, m := range []*extprocv3.ProcessingRequest{
		{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: []byte("x")}}, MetadataContext: md, Attributes: attrs},
		{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{}}, MetadataContext: md},
		{MetadataContext: md},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want := &extprocv3.ProcessingRequest{}
		werr := proto.Unmarshal(stripped(b), want)
		got := &extprocv3.ProcessingRequest{}
		gerr := unmarshalRequest(b, got)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("proto: %v, codec: %v", werr, gerr)
		}
		if werr == nil && !proto.Equal(got, want) {
			t.Fatalf("codec decoded %v, proto %v", got, want)
		}
	})
}

// stripped is b without fields 8 and 9 when it parses as fields and has no
// field 2; else b.
func stripped(b []byte) []byte {
	var out []byte
	for rest := b; len(rest) > 0; {
		num, typ, n := protowire.ConsumeTag(rest)
		if n < 0 {
			return b
		}
		m := protowire.ConsumeFieldValue(num, typ, rest[n:])
		if m < 0 {
			return b
		}
		if num == 2 {
			return b
		}
		if num != 8 && num != 9 {
			out = append(out, rest[:n+m]...)
		}
		rest = rest[n+m:]
	}
	return out
}
