package processor

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mcp-extproc/mcp-extproc/pkg/structwire"
)

func envoyTestContext(t testing.TB) (*corev3.Metadata, map[string]*structpb.Struct) {
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

// TestCodecEnvoyContext: the request headers keep their attributes and
// their metadata_context, the latter encoded for forwardedMetadata; every
// other message is decoded whole but for both.
func TestCodecEnvoyContext(t *testing.T) {
	md, attrs := envoyTestContext(t)
	headers := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{
		Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{{Key: ":path", RawValue: []byte("/mcp")}}}}},
		MetadataContext: md, Attributes: attrs}
	body := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{
		Body: []byte(`{"jsonrpc":"2.0"}`), EndOfStream: true}}, MetadataContext: md, Attributes: attrs, ObservabilityMode: true}
	c := NewCodec()
	for _, tc := range []struct {
		name     string
		in       *extprocv3.ProcessingRequest
		want     *extprocv3.ProcessingRequest // but for the unknown fields
		metadata *corev3.Metadata
	}{
		{"request headers", headers, &extprocv3.ProcessingRequest{Request: headers.Request, Attributes: attrs}, md},
		{"request body", body, &extprocv3.ProcessingRequest{Request: body.Request, ObservabilityMode: true}, nil},
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
			fm, err := forwardedMetadata(got)
			if err != nil {
				t.Fatal(err)
			}
			if !metadataEqual(t, fm, tc.metadata) {
				t.Errorf("forwarded metadata %x, want %v", []byte(fm), tc.metadata)
			}
			got.ProtoReflect().SetUnknown(nil)
			if !proto.Equal(got, tc.want) {
				t.Errorf("decoded %v, want %v", got, tc.want)
			}
			// Served without the codec, the same metadata reads the same.
			if fm, err := forwardedMetadata(tc.in); tc.metadata != nil && (err != nil || !metadataEqual(t, fm, tc.metadata)) {
				t.Errorf("forwarded metadata of a decoded message %x, %v", []byte(fm), err)
			}
		})
	}
	if c.Name() != "proto" {
		t.Errorf("codec name %q, want proto", c.Name())
	}
}

// metadataEqual reports whether the encoded fm decodes to want (nil: fm is
// empty too).
func metadataEqual(t testing.TB, fm structwire.Metadata, want *corev3.Metadata) bool {
	t.Helper()
	if want == nil {
		return fm == nil
	}
	var got corev3.Metadata
	if err := proto.Unmarshal(fm, &got); err != nil {
		t.Fatal(err)
	}
	return proto.Equal(&got, want)
}

// FuzzCodec: whatever bytes arrive, the codec decodes what proto decodes
// from the same bytes without the fields it leaves out (metadata_context
// always, attributes but of a message with request headers), and fails
// exactly when that fails: the fields it leaves out are not read, so their
// contents cannot fail it. What it keeps of metadata_context decodes as
// proto decodes it from the whole message.
func FuzzCodec(f *testing.F) {
	md, attrs := envoyTestContext(f)
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
		if werr != nil {
			return
		}
		fm, ferr := forwardedMetadata(got)
		whole := &extprocv3.ProcessingRequest{}
		if proto.Unmarshal(b, whole) == nil && hasField(b, fieldRequestHeaders) {
			if ferr != nil {
				t.Fatalf("proto decodes the message, forwardedMetadata fails: %v", ferr)
			}
			for name := range whole.GetMetadataContext().GetFilterMetadata() {
				if _, ok := fm.Namespace(name); !ok {
					t.Fatalf("namespace %q missing", name)
				}
			}
		}
		got.ProtoReflect().SetUnknown(withoutField(got.ProtoReflect().GetUnknown(), fieldMetadataContext))
		if !proto.Equal(got, want) {
			t.Fatalf("codec decoded %v, proto %v", got, want)
		}
	})
}

// stripped is b without field 8, and without field 9 when it has no field
// 2, when it parses as fields; else b.
func stripped(b []byte) []byte {
	if !parses(b) {
		return b
	}
	out := withoutField(b, fieldMetadataContext)
	if !hasField(b, fieldRequestHeaders) {
		out = withoutField(out, fieldAttributes)
	}
	return out
}

// parses reports whether b is a sequence of fields.
func parses(b []byte) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return false
		}
		b = b[n+m:]
	}
	return true
}

// withoutField is the fields of b (which parses) but those numbered num.
func withoutField(b []byte, num protowire.Number) []byte {
	var out []byte
	for len(b) > 0 {
		n0, typ, n := protowire.ConsumeTag(b)
		m := protowire.ConsumeFieldValue(n0, typ, b[n:])
		if n0 != num {
			out = append(out, b[:n+m]...)
		}
		b = b[n+m:]
	}
	return out
}

// hasField reports whether b (which parses) has a field numbered num.
func hasField(b []byte, num protowire.Number) bool {
	return len(withoutField(b, num)) != len(b)
}

// TestCodecBadMetadata: metadata protobuf would refuse (invalid UTF-8 in a
// claim) does not fail the message, as it did when the codec decoded it;
// forwardedMetadata says why, and the processor reads it as none.
func TestCodecBadMetadata(t *testing.T) {
	value := protowire.AppendString(protowire.AppendTag(nil, 3, protowire.BytesType), "\xff") // string_value
	entry := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "sub")
	entry = protowire.AppendBytes(protowire.AppendTag(entry, 2, protowire.BytesType), value)
	payload := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), entry)
	ns := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "envoy.filters.http.jwt_authn")
	ns = protowire.AppendBytes(protowire.AppendTag(ns, 2, protowire.BytesType), payload)
	md := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), ns)
	b, err := proto.Marshal(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{}}})
	if err != nil {
		t.Fatal(err)
	}
	b = protowire.AppendBytes(protowire.AppendTag(b, fieldMetadataContext, protowire.BytesType), md)
	if proto.Unmarshal(b, &extprocv3.ProcessingRequest{}) == nil {
		t.Fatal("the case is wrong: proto decodes it")
	}
	got := &extprocv3.ProcessingRequest{}
	if err := unmarshalRequest(b, got); err != nil || got.GetRequestHeaders() == nil {
		t.Fatalf("decoded %v, %v: want the request headers", got, err)
	}
	if fm, err := forwardedMetadata(got); err == nil {
		t.Errorf("forwardedMetadata = %x, nil; want an error", []byte(fm))
	}
}
