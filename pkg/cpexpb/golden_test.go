package cpexpb

import (
	"bytes"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the hand-built bytes")

// wire builds protobuf bytes field by field from the field-number table of
// the cpex protocol, independently of the generated code.
type wire []byte

func (w wire) str(num protowire.Number, s string) wire {
	b := protowire.AppendTag(w, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func (w wire) msg(num protowire.Number, m wire) wire {
	b := protowire.AppendTag(w, num, protowire.BytesType)
	return protowire.AppendBytes(b, m)
}

func (w wire) varint(num protowire.Number, v uint64) wire {
	b := protowire.AppendTag(w, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// kv is google.protobuf.Struct{fields: {key: Value{string_value: val}}}:
// a map entry (1 key, 2 value) in field 1, Value.string_value is field 3.
func kv(key, val string) wire {
	entry := wire(nil).str(1, key).msg(2, wire(nil).str(3, val))
	return wire(nil).msg(1, entry)
}

func kvStruct(key, val string) *structpb.Struct {
	return &structpb.Struct{Fields: map[string]*structpb.Value{key: structpb.NewStringValue(val)}}
}

func neg(n int64) uint64 { return uint64(n) } // int32 is sign-extended to 64 bits

func goldenCases() []struct {
	name string
	msg  proto.Message
	wire wire
} {
	global := wire(nil).str(1, "req-1").str(2, "srv").str(3, "tenant").str(4, "alice").
		msg(6, kv("gm", "1")).msg(7, kv("gs", "2"))
	ctx := wire(nil).msg(1, global).msg(2, kv("s", "x")).msg(3, kv("m", "y"))
	ctxMsg := &PluginContext{
		GlobalContext: &GlobalContext{
			RequestId: "req-1", ServerId: "srv", TenantId: "tenant",
			UserValue: &GlobalContext_UserString{UserString: "alice"},
			Metadata:  kvStruct("gm", "1"), State: kvStruct("gs", "2"),
		},
		State: kvStruct("s", "x"), Metadata: kvStruct("m", "y"),
	}
	violation := wire(nil).str(1, "r").str(2, "d").str(3, "C").str(4, "p").msg(5, kv("k", "v")).varint(6, neg(-32602))
	return []struct {
		name string
		msg  proto.Message
		wire wire
	}{
		{"GetPluginConfigRequest", &GetPluginConfigRequest{Name: "pii"}, wire(nil).str(1, "pii")},
		{"GetPluginConfigResponse", &GetPluginConfigResponse{Found: true, Config: kvStruct("name", "pii")},
			wire(nil).varint(1, 1).msg(2, kv("name", "pii"))},
		{"GetPluginConfigsRequest", &GetPluginConfigsRequest{}, wire(nil)},
		{"GetPluginConfigsResponse", &GetPluginConfigsResponse{Configs: []*structpb.Struct{kvStruct("name", "a"), kvStruct("name", "b")}},
			wire(nil).msg(1, kv("name", "a")).msg(1, kv("name", "b"))},
		{"InvokeHookRequest", &InvokeHookRequest{HookType: "tool_pre_invoke", PluginName: "pii", Payload: kvStruct("name", "echo"), Context: ctxMsg},
			wire(nil).str(1, "tool_pre_invoke").str(2, "pii").msg(3, kv("name", "echo")).msg(4, ctx)},
		{"InvokeHookResponse", &InvokeHookResponse{
			PluginName: "pii", Result: kvStruct("a", "b"), Context: ctxMsg,
			Error:      &PluginError{Message: "m", PluginName: "pii", Code: "E", Details: kvStruct("k", "v"), McpErrorCode: -32603},
			ResultBase: &PluginResultBase{ContinueProcessing: true, Violation: &PluginViolation{Reason: "r", Description: "d", Code: "C", PluginName: "p", Details: kvStruct("k", "v"), McpErrorCode: -32602}, Metadata: kvStruct("x", "y")},
		}, wire(nil).str(1, "pii").msg(2, kv("a", "b")).msg(3, ctx).
			msg(4, wire(nil).str(1, "m").str(2, "pii").str(3, "E").msg(4, kv("k", "v")).varint(5, neg(-32603))).
			msg(5, wire(nil).varint(1, 1).msg(2, violation).msg(3, kv("x", "y")))},
		{"GlobalContextUserStruct", &GlobalContext{RequestId: "r", UserValue: &GlobalContext_UserStruct{UserStruct: kvStruct("sub", "bob")}},
			wire(nil).str(1, "r").msg(5, kv("sub", "bob"))},
		{"HealthCheckRequest", &HealthCheckRequest{Service: "cpex.PluginService"}, wire(nil).str(1, "cpex.PluginService")},
		{"HealthCheckResponse", &HealthCheckResponse{Status: HealthCheckResponse_SERVICE_UNKNOWN}, wire(nil).varint(1, 3)},
	}
}

// TestGolden checks each message against bytes hand-built from the
// field-number table: they equal the committed golden file, and they decode
// with the generated code to exactly the expected message (a drifted field
// number or type leaves a field unset or unknown, and proto.Equal fails).
// Bytes are not compared with the generated encoding: field order on the
// wire is not part of the contract.
func TestGolden(t *testing.T) {
	for _, tc := range goldenCases() {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join("testdata", "golden", tc.name+".hex")
			if *update {
				if err := os.WriteFile(path, []byte(hex.EncodeToString(tc.wire)+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			text, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			golden, err := hex.DecodeString(strings.TrimSpace(string(text)))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(golden, tc.wire) {
				t.Errorf("golden file %s differs from the field table", path)
			}
			back := tc.msg.ProtoReflect().New().Interface()
			if err := proto.Unmarshal(golden, back); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(back, tc.msg) {
				t.Errorf("golden bytes decode to %v, want %v", back, tc.msg)
			}
		})
	}
}

// TestServiceNames pins the gRPC method paths.
func TestServiceNames(t *testing.T) {
	for got, want := range map[string]string{
		PluginService_GetPluginConfig_FullMethodName:  "/cpex.PluginService/GetPluginConfig",
		PluginService_GetPluginConfigs_FullMethodName: "/cpex.PluginService/GetPluginConfigs",
		PluginService_InvokeHook_FullMethodName:       "/cpex.PluginService/InvokeHook",
		Health_Check_FullMethodName:                   "/cpex.Health/Check",
	} {
		if got != want {
			t.Errorf("method %s, want %s", got, want)
		}
	}
}
