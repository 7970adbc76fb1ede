package mcpecho

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// TaskTool is the TaskServer's task-capable tool: research {"topic"} answers
// "report on <topic>".
const TaskTool = "research"

// tasksExtension is the 2026-07-28 tasks extension's identifier.
const tasksExtension = "io.modelcontextprotocol/tasks"

// TaskServer is a small hand-written MCP server (JSON answers only) whose
// tool research runs as a task, because the Go SDK v1.8.0 has no tasks:
//
//   - 2025-11-25 (tasks as in SEP-1686): initialize issues an Mcp-Session-Id;
//     tools/call with params.task answers {"task":{"taskId",…}}; tasks/get
//     answers the task's status; tasks/result answers the tool's
//     CallToolResult (with _meta io.modelcontextprotocol/related-task).
//   - 2026-07-28 (the tasks extension): a tools/call whose
//     _meta clientCapabilities declare the extension answers
//     {"resultType":"task","taskId",…}; tasks/get of a completed task carries
//     the CallToolResult in "result".
//
// A task reports "working" to its first PollsToComplete tasks/get requests
// and is completed after; tasks/result completes it at once (it would
// block until then). Tasks belong to the session that created them (none
// for 2026-07-28); another session's tasks/get finds nothing. Without
// params.task (and without the extension) research answers at once.
type TaskServer struct {
	// PollsToComplete is how many tasks/get see "working" before
	// "completed"; 0 means 1.
	PollsToComplete int

	mu       sync.Mutex
	tasks    map[string]*task // by session + "\x00" + task id
	sessions map[string]bool
}

type task struct {
	id, topic     string
	polls         int
	completed     bool
	created       time.Time
	extensionMode bool
}

// rpc is the part of a JSON-RPC request the server reads.
type rpc struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name      string `json:"name"`
		Arguments struct {
			Topic string `json:"topic"`
		} `json:"arguments"`
		Task   *struct{ TTL int64 } `json:"task"`
		TaskID string               `json:"taskId"`
		Meta   struct {
			Capabilities struct {
				Extensions map[string]json.RawMessage `json:"extensions"`
			} `json:"io.modelcontextprotocol/clientCapabilities"`
		} `json:"_meta"`
	} `json:"params"`
}

// ServeHTTP implements http.Handler for POST /mcp.
func (s *TaskServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var req rpc
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorReply(nil, -32700, "parse error"))
		return
	}
	if req.ID == nil { // a notification
		w.WriteHeader(http.StatusAccepted)
		return
	}
	session := r.Header.Get("Mcp-Session-Id")
	if req.Method == "initialize" {
		session = newID()
		s.mu.Lock()
		if s.sessions == nil {
			s.sessions = map[string]bool{}
		}
		s.sessions[session] = true
		s.mu.Unlock()
		w.Header().Set("Mcp-Session-Id", session)
	}
	result, rpcErr := s.handle(session, &req)
	if rpcErr != nil {
		writeJSON(w, http.StatusOK, rpcErr)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
}

func (s *TaskServer) handle(session string, req *rpc) (any, map[string]any) {
	switch req.Method {
	case "initialize":
		return map[string]any{
			"protocolVersion": "2025-11-25",
			"serverInfo":      map[string]string{"name": "mcp-echo-tasks", "version": "1.0.0"},
			"capabilities": map[string]any{
				"tools": map[string]any{},
				"tasks": map[string]any{"requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}},
			},
		}, nil
	case "tools/list":
		return map[string]any{"tools": []any{map[string]any{
			"name": TaskTool, "description": "Writes a report, as a task if asked.",
			"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"topic": map[string]string{"type": "string"}}},
			"execution":   map[string]string{"taskSupport": "optional"},
		}}}, nil
	case "tools/call":
		if req.Params.Name != TaskTool {
			return nil, errorReply(req.ID, -32602, "unknown tool "+req.Params.Name)
		}
		return s.call(session, req), nil
	case "tasks/get", "tasks/result":
		t := s.find(session, req.Params.TaskID)
		if t == nil {
			return nil, errorReply(req.ID, -32602, "unknown task "+req.Params.TaskID)
		}
		return s.taskAnswer(req.Method, t), nil
	}
	return nil, errorReply(req.ID, -32601, "method not found: "+req.Method)
}

// call runs research at once, or creates a task for it.
func (s *TaskServer) call(session string, req *rpc) any {
	_, ext := req.Params.Meta.Capabilities.Extensions[tasksExtension]
	if req.Params.Task == nil && !ext {
		return toolResult(req.Params.Arguments.Topic)
	}
	t := &task{id: newID(), topic: req.Params.Arguments.Topic, created: time.Now().UTC(), extensionMode: ext}
	s.mu.Lock()
	if s.tasks == nil {
		s.tasks = map[string]*task{}
	}
	s.tasks[session+"\x00"+t.id] = t
	s.mu.Unlock()
	state := taskState(t, "working")
	if ext {
		state["resultType"] = "task"
		return state
	}
	return map[string]any{"task": state}
}

func (s *TaskServer) find(session, id string) *task {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tasks[session+"\x00"+id]
}

// taskAnswer advances t and answers tasks/get or tasks/result.
func (s *TaskServer) taskAnswer(method string, t *task) any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if method == "tasks/result" {
		t.completed = true
		res := toolResult(t.topic)
		res["_meta"] = map[string]any{"io.modelcontextprotocol/related-task": map[string]string{"taskId": t.id}}
		return res
	}
	t.polls++
	if t.polls > max(1, s.PollsToComplete) {
		t.completed = true
	}
	status := "working"
	if t.completed {
		status = "completed"
	}
	state := taskState(t, status)
	if t.extensionMode {
		state["resultType"] = "complete"
		if t.completed {
			state["result"] = toolResult(t.topic)
		}
	}
	return state
}

func taskState(t *task, status string) map[string]any {
	ts := t.created.Format(time.RFC3339Nano)
	state := map[string]any{"taskId": t.id, "status": status, "createdAt": ts, "lastUpdatedAt": ts}
	if t.extensionMode {
		state["ttlMs"], state["pollIntervalMs"] = 60000, 100
	} else {
		state["ttl"], state["pollInterval"] = 60000, 100
	}
	return state
}

func toolResult(topic string) map[string]any {
	return map[string]any{"content": []any{map[string]string{"type": "text", "text": "report on " + topic}}}
}

func errorReply(id json.RawMessage, code int, msg string) map[string]any {
	return map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, fmt.Sprintf("encode: %v", err), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

func newID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}
