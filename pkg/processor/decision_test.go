package processor

import (
	"testing"
	"time"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestShallowCopy: every field of a reply survives the copy the decision
// metadata is added to, shared rather than copied. (The copy before it
// dropped typed_dynamic_metadata, the two per-direction drains and
// server_window_update.) It fails when Envoy's API adds a field the test
// does not set, so a new field is seen and copied.
func TestShallowCopy(t *testing.T) {
	resp := &extprocv3.ProcessingResponse{
		Response:               &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{}},
		ModeOverride:           &filterv3.ProcessingMode{RequestBodyMode: filterv3.ProcessingMode_BUFFERED},
		OverrideMessageTimeout: durationpb.New(time.Second),
		RequestDrain:           true,
		RequestDrainRequests:   true,
		RequestDrainResponses:  true,
		ServerWindowUpdate:     &extprocv3.ProcessingResponse_ServerWindowUpdate{},
		DynamicMetadata:        &structpb.Struct{},
		TypedDynamicMetadata:   map[string]*anypb.Any{"x": {TypeUrl: "type.googleapis.com/google.protobuf.Struct"}},
	}
	n := 0
	resp.ProtoReflect().Range(func(protoreflect.FieldDescriptor, protoreflect.Value) bool { n++; return true })
	want := 0 // one per field outside a oneof, one per oneof
	fds := resp.ProtoReflect().Descriptor().Fields()
	for i := range fds.Len() {
		if fds.Get(i).ContainingOneof() == nil {
			want++
		}
	}
	want += resp.ProtoReflect().Descriptor().Oneofs().Len()
	if n != want {
		t.Fatalf("the test sets %d fields of %d: set the new ones", n, want)
	}
	out := shallowCopy(resp)
	if !proto.Equal(out, resp) {
		t.Errorf("copy %v, want %v", out, resp)
	}
	if out.ModeOverride != resp.ModeOverride {
		t.Error("the copy copied a message it could share")
	}
}
