package attribution

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestCreatedTaskID(t *testing.T) {
	tests := []struct {
		result, want string
	}{
		{`{"task":{"taskId":"abc","status":"working","ttl":60000}}`, "abc"},
		{`{"resultType":"task","taskId":"abc","status":"working","ttlMs":60000}`, "abc"},
		{`{"content":[{"type":"text","text":"hi"}]}`, ""},
		{`{"resultType":"complete","taskId":"abc","status":"completed","result":{}}`, ""}, // a tasks/get answer
		{`{"resultType":"task","task":{"taskId":"abc"}}`, ""},
		{`{"task":{"taskId":""}}`, ""},
		{`{"task":{"TaskId":"abc"}}`, ""},
		{`{"Task":{"taskId":"abc"}}`, ""},
		{`{"task":{"taskId":"abc","taskId":"def"}}`, ""},
		{`{"task":"abc"}`, ""},
		{`[]`, ""},
		{``, ""},
	}
	for _, tt := range tests {
		got, ok := CreatedTaskID([]byte(tt.result))
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("CreatedTaskID(%s) = %q, %v; want %q", tt.result, got, ok, tt.want)
		}
	}
}

func TestParamsTaskID(t *testing.T) {
	tests := map[string]string{
		`{"taskId":"abc"}`:                     "abc",
		`{"taskId":"abc","_meta":{}}`:          "abc",
		`{"taskid":"abc"}`:                     "",
		`{"taskId":7}`:                         "",
		`{"taskId":"a","taskId":"b"}`:          "",
		`{}`:                                   "",
		`{"taskId":"abc","inputResponses":{}}`: "abc",
	}
	for params, want := range tests {
		got, ok := ParamsTaskID([]byte(params))
		if got != want || ok != (want != "") {
			t.Errorf("ParamsTaskID(%s) = %q, %v; want %q", params, got, ok, want)
		}
	}
}

// TestRecordedCreateTaskResult reads the CreateTaskResult that the
// TypeScript SDK server sent (recorded in internal/mcpecho/testdata).
func TestRecordedCreateTaskResult(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "internal", "mcpecho", "testdata", "mcp-replay", "post-tools-call-task.http"))
	if err != nil {
		t.Fatal(err)
	}
	_, data, ok := bytes.Cut(raw, []byte("data: {\"result\":"))
	if !ok {
		t.Fatal("no result event in recording")
	}
	end := bytes.LastIndex(data, []byte(`,"jsonrpc"`))
	if got, ok := CreatedTaskID(data[:end]); !ok || got != "3005d3a33d8b8342e961c667414e61a7" {
		t.Fatalf("CreatedTaskID = %q, %v", got, ok)
	}
}
