package processor

import (
	"strings"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/google/go-cmp/cmp"
)

// TestDecisionWire: the decision withDecision encodes by hand decodes, on
// the receiving side, as the dynamic_metadata proto.Marshal makes of the
// same decision built as Structs; the reply's own fields survive; a second
// write (a raised outcome) does not overwrite the first reply; a value
// that is not UTF-8 is repaired instead of failing the marshalling.
func TestDecisionWire(t *testing.T) {
	canned := &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{}}}
	long := strings.Repeat("t", decisionBufSize) // past the in-place buffer
	for _, d := range []decisionValues{
		{method: "tools/list", outcome: decisionAllowed},
		{method: "tools/call", name: "echo", outcome: decisionBlocked, by: "Guard", byKind: byPlugin, code: "DENY", user: "alice", tenant: "acme"},
		{method: "tools/call", name: long, outcome: decisionModified, by: "r1", byKind: byRule, user: long},
		{method: "tools/call", name: "x", outcome: decisionAllowed, user: "bad\xffbyte"},
	} {
		st := &exchange{}
		st.decision.decisionValues, st.decision.dirty = d, true
		first := st.decision.attach(canned)
		b1 := marshalDecoded(t, first)
		checkDecision(t, b1, canned, &d)

		st.decision.raise(decisionBlocked, "later", byRule, "")
		raised := st.decision.decisionValues
		if !st.decision.dirty { // already blocked: nothing to send again
			if again := st.decision.attach(canned); again != canned {
				t.Error("an unchanged decision was sent again")
			}
			continue
		}
		second := st.decision.attach(canned)
		if second == first {
			t.Fatal("the second write reused the first reply")
		}
		checkDecision(t, marshalDecoded(t, first), canned, &d) // unchanged
		checkDecision(t, marshalDecoded(t, second), canned, &raised)
		if again := st.decision.attach(canned); again != canned {
			t.Error("an unchanged decision was sent again")
		}
	}
	if canned.GetDynamicMetadata() != nil || len(canned.ProtoReflect().GetUnknown()) != 0 {
		t.Error("the canned reply was changed")
	}
}

func marshalDecoded(t *testing.T, r *extprocv3.ProcessingResponse) *extprocv3.ProcessingResponse {
	t.Helper()
	b, err := proto.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var out extprocv3.ProcessingResponse
	if err := proto.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

func checkDecision(t *testing.T, got, canned *extprocv3.ProcessingResponse, d *decisionValues) {
	t.Helper()
	want := proto.Clone(canned).(*extprocv3.ProcessingResponse)
	md := d.metadata()
	for k, v := range md.Fields {
		v.Kind = &structpb.Value_StringValue{StringValue: strings.ToValidUTF8(v.GetStringValue(), "\uFFFD")}
		md.Fields[k] = v
	}
	want.DynamicMetadata = &structpb.Struct{Fields: map[string]*structpb.Value{MetadataNamespace: structpb.NewStructValue(md)}}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("decoded reply (-want +got):\n%s", diff)
	}
}
