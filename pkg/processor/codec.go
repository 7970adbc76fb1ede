package processor

import (
	"fmt"
	"slices"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/mcp-extproc/mcp-extproc/pkg/structwire"
)

// Envoy puts the forwarded dynamic metadata (metadata_context: a verified
// JWT payload, say) on every ext_proc message, and the request attributes
// on the first of each direction, but the processor reads them from the
// request headers only (identity.go). Codec decodes a ProcessingRequest
// without them when it is any other message. Of the request headers it
// decodes the attributes but leaves metadata_context encoded, among the
// message's unknown fields: [forwardedMetadata] reads the few claims it
// needs from there (package structwire), where decoding a 12-claim JWT
// payload into Structs would cost about 17 µs and 115 allocations per
// request. Everything else is gRPC's proto codec, unchanged.

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

// unmarshalRequest decodes b, an encoded ProcessingRequest, into m:
// without its metadata_context and attributes unless it carries request
// headers, and with metadata_context left encoded (unknown fields) when it
// does. The parts between the fields left out are decoded one after the
// other into m (the wire format's concatenation is a merge), so nothing is
// copied but metadata_context. Bytes that do not parse as fields are
// decoded whole, for proto.Unmarshal to say why.
func unmarshalRequest(b []byte, m *extprocv3.ProcessingRequest) error {
	skip, kept := envoyContextSpans(b)
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
	if err := merge.Unmarshal(b[prev:], m); err != nil {
		return err
	}
	if kept {
		r := m.ProtoReflect()
		unknown := r.GetUnknown()
		for _, s := range skip {
			unknown = append(unknown, b[s[0]:s[1]]...) // b is the transport's buffer: copied
		}
		r.SetUnknown(unknown)
	}
	return nil
}

// envoyContextSpans returns the spans of the fields of b that
// unmarshalRequest leaves out: metadata_context and attributes, or, when b
// carries request headers, metadata_context only (kept then reports
// true). It returns nil when b does not parse.
func envoyContextSpans(b []byte) (skip [][2]int, kept bool) {
	var meta, attrs [][2]int
	for i := 0; i < len(b); {
		num, typ, n := protowire.ConsumeTag(b[i:])
		if n < 0 {
			return nil, false
		}
		m := protowire.ConsumeFieldValue(num, typ, b[i+n:])
		if m < 0 {
			return nil, false
		}
		switch num {
		case fieldRequestHeaders:
			kept = true
		case fieldMetadataContext:
			meta = append(meta, [2]int{i, i + n + m})
		case fieldAttributes:
			attrs = append(attrs, [2]int{i, i + n + m})
		}
		i += n + m
	}
	if kept {
		return meta, true
	}
	skip = append(meta, attrs...)
	slices.SortFunc(skip, func(x, y [2]int) int { return x[0] - y[0] })
	return skip, false
}

// forwardedMetadata returns the metadata_context Envoy sent with r,
// checked for reading (structwire.Parse): as the codec left it encoded, or,
// from a server without the codec, encoded again. nil when r has none.
func forwardedMetadata(r *extprocv3.ProcessingRequest) (structwire.Metadata, error) {
	if md := r.GetMetadataContext(); md != nil {
		b, err := proto.Marshal(md)
		if err != nil {
			return nil, fmt.Errorf("encode metadata_context: %w", err)
		}
		return structwire.Parse(b)
	}
	var enc []byte
	for rest := r.ProtoReflect().GetUnknown(); len(rest) > 0; {
		num, typ, n := protowire.ConsumeTag(rest)
		m := protowire.ConsumeFieldValue(num, typ, rest[max(n, 0):])
		if n < 0 || m < 0 {
			return nil, fmt.Errorf("unknown fields: %w", protowire.ParseError(min(n, m)))
		}
		if num == fieldMetadataContext && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(rest[n:])
			if enc == nil {
				enc = v
			} else {
				enc = append(enc[:len(enc):len(enc)], v...) // a message given twice is merged: concatenated
			}
		}
		rest = rest[n+m:]
	}
	if enc == nil {
		return nil, nil
	}
	return structwire.Parse(enc)
}
