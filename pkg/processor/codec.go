package processor

import (
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Envoy puts the forwarded dynamic metadata (metadata_context: a verified
// JWT payload, say) on every ext_proc message, and the request attributes
// on the first of each direction, but the processor reads them from the
// request headers only (identity.go). Codec decodes a ProcessingRequest
// without them when it is any other message, so a JWT is decoded once per
// request rather than once per message; everything else is gRPC's proto
// codec, unchanged.

// Field numbers of envoy.service.ext_proc.v3.ProcessingRequest.
const (
	fieldRequestHeaders  protowire.Number = 2
	fieldMetadataContext protowire.Number = 8
	fieldAttributes      protowire.Number = 9
)

// NewCodec returns the gRPC codec of the ExternalProcessor server (pass it
// with grpc.ForceServerCodecV2). It is named "proto", as the codec it
// wraps.
func NewCodec() encoding.CodecV2 {
	return codec{base: encoding.GetCodecV2(grpcproto.Name)}
}

type codec struct{ base encoding.CodecV2 }

func (c codec) Name() string { return c.base.Name() }

func (c codec) Marshal(v any) (mem.BufferSlice, error) { return c.base.Marshal(v) }

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(*extprocv3.ProcessingRequest)
	if !ok {
		return c.base.Unmarshal(data, v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	return unmarshalRequest(buf.ReadOnlyData(), m)
}

// unmarshalRequest decodes b, an encoded ProcessingRequest, into m, without
// its metadata_context and attributes unless it carries request headers.
// The parts between the fields left out are decoded one after the other
// into m (the wire format's concatenation is a merge), so nothing is
// copied. Bytes that do not parse as fields are decoded whole, for
// proto.Unmarshal to say why.
func unmarshalRequest(b []byte, m *extprocv3.ProcessingRequest) error {
	skip := envoyContextSpans(b)
	if len(skip) == 0 {
		return proto.Unmarshal(b, m)
	}
	proto.Reset(m)
	merge := proto.UnmarshalOptions{Merge: true}
	prev := 0
	for _, s := range skip {
		if err := merge.Unmarshal(b[prev:s[0]], m); err != nil {
			return err
		}
		prev = s[1]
	}
	return merge.Unmarshal(b[prev:], m)
}

// envoyContextSpans returns the spans of b's metadata_context and
// attributes fields, or nil when b carries request headers, has neither,
// or does not parse.
func envoyContextSpans(b []byte) [][2]int {
	var skip [][2]int
	for i := 0; i < len(b); {
		num, typ, n := protowire.ConsumeTag(b[i:])
		if n < 0 {
			return nil
		}
		m := protowire.ConsumeFieldValue(num, typ, b[i+n:])
		if m < 0 {
			return nil
		}
		switch num {
		case fieldRequestHeaders:
			return nil
		case fieldMetadataContext, fieldAttributes:
			skip = append(skip, [2]int{i, i + n + m})
		}
		i += n + m
	}
	return skip
}
