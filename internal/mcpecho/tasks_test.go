package mcpecho

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/pkg/attribution"
)

// TestTasks2025: tools/call with params.task answers a CreateTaskResult
// without the tool's output; tasks/get reports working then completed;
// tasks/result carries the output; another session cannot see the task.
func TestTasks2025(t *testing.T) {
	srv := httptest.NewServer(&TaskServer{PollsToComplete: 1})
	defer srv.Close()
	init := do(t, srv, http.MethodPost, nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	sid := init.Header.Get("Mcp-Session-Id")
	h := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}

	created := decode(t, do(t, srv, http.MethodPost, h, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"research","arguments":{"topic":"otters"},"task":{"ttl":60000}}}`).Body)
	id, ok := attribution.CreatedTaskID(created.Result)
	if !ok || strings.Contains(string(created.Result), "report on") {
		t.Fatalf("CreateTaskResult = %s", created.Result)
	}
	get := fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":%q}}`, id)
	for _, want := range []string{`"status":"working"`, `"status":"completed"`} {
		if r := decode(t, do(t, srv, http.MethodPost, h, get).Body); !strings.Contains(string(r.Result), want) {
			t.Fatalf("tasks/get = %s, want %s", r.Result, want)
		}
	}
	res := decode(t, do(t, srv, http.MethodPost, h, fmt.Sprintf(`{"jsonrpc":"2.0","id":4,"method":"tasks/result","params":{"taskId":%q}}`, id)).Body)
	if !strings.Contains(string(res.Result), "report on otters") || !strings.Contains(string(res.Result), id) {
		t.Fatalf("tasks/result = %s", res.Result)
	}
	other := map[string]string{"Mcp-Session-Id": "someone-else", "Mcp-Protocol-Version": "2025-11-25"}
	if r := decode(t, do(t, srv, http.MethodPost, other, get).Body); r.Error == nil {
		t.Fatalf("another session's tasks/get = %s, want an error", r.Result)
	}
	direct := decode(t, do(t, srv, http.MethodPost, h, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"research","arguments":{"topic":"bees"}}}`).Body)
	if !strings.Contains(string(direct.Result), "report on bees") {
		t.Fatalf("tools/call without task = %s", direct.Result)
	}
}

// TestTasks2026: with the tasks extension declared in the request's
// capabilities, tools/call answers resultType "task" and the result comes in
// the "result" member of a completed tasks/get.
func TestTasks2026(t *testing.T) {
	srv := httptest.NewServer(&TaskServer{})
	defer srv.Close()
	h := map[string]string{"Mcp-Protocol-Version": v26, "Mcp-Method": "tools/call", "Mcp-Name": TaskTool}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
	created := decode(t, do(t, srv, http.MethodPost, h, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"research","arguments":{"topic":"otters"},`+meta+`}}`).Body)
	id, ok := attribution.CreatedTaskID(created.Result)
	if !ok || !strings.Contains(string(created.Result), `"resultType":"task"`) {
		t.Fatalf("CreateTaskResult = %s", created.Result)
	}
	h["Mcp-Method"] = "tasks/get"
	delete(h, "Mcp-Name")
	get := fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":%q}}`, id)
	if r := decode(t, do(t, srv, http.MethodPost, h, get).Body); strings.Contains(string(r.Result), "report on") {
		t.Fatalf("working tasks/get carries the result: %s", r.Result)
	}
	r := decode(t, do(t, srv, http.MethodPost, h, get).Body)
	var done struct {
		ResultType, Status string
		Result             json.RawMessage
	}
	if err := json.Unmarshal(r.Result, &done); err != nil || done.ResultType != "complete" || done.Status != "completed" ||
		!strings.Contains(string(done.Result), "report on otters") {
		t.Fatalf("completed tasks/get = %s (%v)", r.Result, err)
	}
}
