package hookfamily

import (
	"encoding/json"
	"testing"
)

// TestHookedResult: what of an answer the post hook sees, per route.
func TestHookedResult(t *testing.T) {
	call, _ := ByMethod("tools/call")
	get, _ := ByMethod("tasks/get")
	result, _ := ByMethod("tasks/result")
	tests := []struct {
		name   string
		route  *Route
		result string
		want   string // "" = nothing to hook
	}{
		{"call result", call, `{"content":[]}`, `{"content":[]}`},
		{"call complete", call, `{"resultType":"complete","content":[]}`, `{"resultType":"complete","content":[]}`},
		{"input required", call, `{"resultType":"input_required","inputRequests":{}}`, ""},
		{"input required escaped", call, `{"resultType":"input_\u0072equired"}`, ""},
		{"mentions input_required", call, `{"content":[{"type":"text","text":"input_required"}]}`, `{"content":[{"type":"text","text":"input_required"}]}`},
		{"task created", call, `{"task":{"taskId":"t"}}`, `{"task":{"taskId":"t"}}`},
		{"tasks/result", result, `{"content":[],"_meta":{}}`, `{"content":[],"_meta":{}}`},
		{"tasks/get working", get, `{"taskId":"t","status":"working"}`, ""},
		{"tasks/get completed", get, `{"taskId":"t","status":"completed","result":{"content":[]}}`, `{"content":[]}`},
		{"tasks/get null result", get, `{"taskId":"t","result":null}`, ""},
		{"tasks/get input required", get, `{"resultType":"input_required","result":{"content":[]}}`, ""},
	}
	for _, tt := range tests {
		got, ok := tt.route.HookedResult([]byte(tt.result))
		if tt.want == "" {
			if ok {
				t.Errorf("%s: hooked %s, want nothing", tt.name, got)
			}
			continue
		}
		if !ok || string(got) != tt.want {
			t.Errorf("%s: HookedResult = %s, %v; want %s", tt.name, got, ok, tt.want)
		}
	}
}

func TestWithHookedResult(t *testing.T) {
	get, _ := ByMethod("tasks/get")
	out, err := get.WithHookedResult([]byte(`{"taskId":"t","status":"completed","result":{"content":[1]}}`), []byte(`{"content":[2]}`))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil || v["taskId"] != "t" || v["status"] != "completed" {
		t.Fatalf("WithHookedResult = %s, %v", out, err)
	}
	if r, _ := json.Marshal(v["result"]); string(r) != `{"content":[2]}` {
		t.Errorf("result member = %s", r)
	}
	call, _ := ByMethod("tools/call")
	if out, _ := call.WithHookedResult([]byte(`{"a":1}`), []byte(`{"b":2}`)); string(out) != `{"b":2}` {
		t.Errorf("whole result replaced = %s", out)
	}
}
