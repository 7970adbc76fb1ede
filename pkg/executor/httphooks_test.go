package executor

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

func TestPreRequestHeadersChain(t *testing.T) {
	f := newFake(
		plug("a", config.ModeSequential, 1, cpex.HTTPPreRequest),
		plug("b", config.ModeTransform, 2, cpex.HTTPPreRequest),
		plug("audit", config.ModeAudit, 3, cpex.HTTPPreRequest),
	)
	f.set("a", modifyH(`{"x-added":"1","x-keep":"changed"}`))
	f.set("b", modifyH(`{"x-b":"2"}`))
	f.set("audit", modifyH(`{"x-audit":"discarded"}`))
	e := newExec(t, f, Options{})
	payload := `{"path":"/mcp","method":"POST","headers":{"x-keep":"k","content-type":"application/json"}}`
	out := e.Run(context.Background(), cpex.HTTPPreRequest, json.RawMessage(payload), nil, Target{})
	if out.Err != nil || out.Violation != nil || !out.Modified {
		t.Fatalf("outcome %+v", out)
	}
	want := `{"path":"/mcp","method":"POST","headers":{"content-type":"application/json","x-added":"1","x-b":"2","x-keep":"changed"}}`
	if !jsonEqual(out.Payload, json.RawMessage(want)) {
		t.Errorf("payload %s, want %s", out.Payload, want)
	}
	// b got the full payload with a's headers, not a's header map.
	b := f.callsOf("b")
	if len(b) != 1 || !jsonEqual(json.RawMessage(b[0].payload), json.RawMessage(`{"path":"/mcp","method":"POST","headers":{"content-type":"application/json","x-added":"1","x-keep":"changed"}}`)) {
		t.Errorf("b saw %v", b)
	}

	f.set("a", modifyH(`{"x-keep":"k"}`)) // nothing changes
	f.set("b", okH())
	if out := e.Run(context.Background(), cpex.HTTPPreRequest, json.RawMessage(payload), nil, Target{}); out.Modified {
		t.Errorf("unchanged headers reported modified: %s", out.Payload)
	}
	f.set("a", modifyH(`{"x-n":1}`))
	out = e.Run(context.Background(), cpex.HTTPPreRequest, json.RawMessage(payload), nil, Target{})
	if out.Err == nil || !errors.Is(out.Err, ErrInvalidPayload) {
		t.Errorf("a non-string header: outcome %+v, want ErrInvalidPayload (on_error fail)", out)
	}
}

func TestResolveUserIsAResult(t *testing.T) {
	f := newFake(
		plug("first", config.ModeSequential, 1, cpex.HTTPAuthResolveUser),
		plug("second", config.ModeSequential, 2, cpex.HTTPAuthResolveUser),
	)
	f.set("first", modifyH(`{"email":"alice@example.com"}`))
	e := newExec(t, f, Options{})
	payload := `{"headers":{"authorization":"Bearer t"},"credentials":{"scheme":"Bearer","credentials":"t"}}`
	out := e.Run(context.Background(), cpex.HTTPAuthResolveUser, json.RawMessage(payload), nil, Target{})
	if !out.Modified || !jsonEqual(out.Payload, json.RawMessage(`{"email":"alice@example.com"}`)) {
		t.Fatalf("outcome %+v", out)
	}
	if s := f.callsOf("second"); len(s) != 1 || !jsonEqual(json.RawMessage(s[0].payload), json.RawMessage(payload)) {
		t.Errorf("second saw %v, want the request's payload", s)
	}
	f.set("second", modifyH(`{"email":"bob@example.com"}`))
	out = e.Run(context.Background(), cpex.HTTPAuthResolveUser, json.RawMessage(payload), nil, Target{})
	if !jsonEqual(out.Payload, json.RawMessage(`{"email":"bob@example.com"}`)) {
		t.Errorf("last writer: %s", out.Payload)
	}
	f.set("second", modifyH(`"bob"`))
	if out = e.Run(context.Background(), cpex.HTTPAuthResolveUser, json.RawMessage(payload), nil, Target{}); !errors.Is(out.Err, ErrInvalidPayload) {
		t.Errorf("a non-object user: %+v", out)
	}
}

// recorded returns a handler answering with a recorded cpex reply.
func recorded(t *testing.T, name string) handler {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "cpex-http", name))
	if err != nil {
		t.Fatal(err)
	}
	var reply cpex.InvokeHookReply
	if err := json.Unmarshal(raw, &reply); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return func(context.Context, json.RawMessage, *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		r := reply
		return &r, nil
	}
}

// TestRecordedHTTPAnswers runs the answers of the real cpex 0.1.3 server
// through the chain.
func TestRecordedHTTPAnswers(t *testing.T) {
	pre := `{"path":"/mcp","method":"POST","client_host":"10.0.0.1","client_port":5555,"headers":{"content-type":"application/json","x-remove-me":"bye","authorization":"Bearer good-token","x-keep":"k"}}`
	auth := `{"credentials":{"scheme":"Bearer","credentials":"good-token"},"headers":{"authorization":"Bearer good-token"}}`
	for _, tc := range []struct {
		file    string
		hook    cpex.HookType
		payload string
		check   func(t *testing.T, out Outcome, rc *RequestContext)
	}{
		{"pre_request.json", cpex.HTTPPreRequest, pre, func(t *testing.T, out Outcome, rc *RequestContext) {
			// Set, never removed: x-remove-me stays, x-added comes.
			want := `{"path":"/mcp","method":"POST","client_host":"10.0.0.1","client_port":5555,"headers":{"content-type":"application/json","x-remove-me":"bye","authorization":"Bearer good-token","x-keep":"k","x-added":"1"}}`
			if !out.Modified || !jsonEqual(out.Payload, json.RawMessage(want)) {
				t.Errorf("payload %s", out.Payload)
			}
			if rc.Global.State["seen_pre"] != true {
				t.Errorf("global state %v, want seen_pre carried", rc.Global.State)
			}
		}},
		{"pre_request_block.json", cpex.HTTPPreRequest, pre, func(t *testing.T, out Outcome, _ *RequestContext) {
			v := out.Violation
			if v == nil || v.Code != "BLOCKED_HEADER" || v.HTTPStatusCode == nil || *v.HTTPStatusCode != 403 || v.HTTPHeaders["x-blocked-by"] != "hooks" {
				t.Errorf("violation %+v", v)
			}
		}},
		{"resolve_user.json", cpex.HTTPAuthResolveUser, auth, func(t *testing.T, out Outcome, _ *RequestContext) {
			var u cpex.ResolvedUser
			if err := json.Unmarshal(out.Payload, &u); err != nil || u.Email != "alice@example.com" || u.FullName != "Alice" || u.IsActive == nil || !*u.IsActive {
				t.Errorf("user %s (%v)", out.Payload, err)
			}
		}},
		{"resolve_user_bad_token.json", cpex.HTTPAuthResolveUser, auth, func(t *testing.T, out Outcome, _ *RequestContext) {
			if v := out.Violation; v == nil || v.Code != "INVALID_TOKEN" || *v.HTTPStatusCode != 401 || v.HTTPHeaders["WWW-Authenticate"] != "Bearer" {
				t.Errorf("violation %+v", v)
			}
		}},
		{"validation_error.json", cpex.HTTPPreRequest, pre, func(t *testing.T, out Outcome, _ *RequestContext) {
			if out.Err == nil || out.Violation != nil || out.Modified {
				t.Errorf("outcome %+v, want a plugin error under on_error fail", out)
			}
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			f := newFake(plug("HooksPlugin", config.ModeSequential, 1, tc.hook))
			f.set("HooksPlugin", recorded(t, tc.file))
			e := newExec(t, f, Options{})
			rc := NewRequestContext(cpex.GlobalContext{RequestID: "r1"})
			tc.check(t, e.Run(context.Background(), tc.hook, json.RawMessage(tc.payload), rc, Target{}), rc)
		})
	}
}

// A context made without maps sends empty objects, never null: cpex
// reads context.global_context.state and .metadata as objects.
func TestRequestContextSendsObjects(t *testing.T) {
	pc := NewRequestContext(cpex.GlobalContext{RequestID: "r"}).PluginContext("p")
	b, err := json.Marshal(pc)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"state":{}`, `"metadata":{}`} {
		if n := strings.Count(string(b), want); n != 2 { // global and local
			t.Errorf("%s: %s %d times, want 2", b, want, n)
		}
	}
}

func TestRequestContextClone(t *testing.T) {
	rc := NewRequestContext(cpex.GlobalContext{RequestID: "r", State: map[string]any{"a": 1}})
	rc.carry("p", config.ModeSequential, &cpex.PluginContext{State: map[string]any{"x": 1}})
	c := rc.Clone()
	c.Global.State["b"] = 2
	c.carry("p", config.ModeSequential, &cpex.PluginContext{State: map[string]any{"x": 2}})
	if _, ok := rc.Global.State["b"]; ok || rc.PluginContext("p").State["x"] != 1 {
		t.Errorf("the clone changed the original: %v, %v", rc.Global.State, rc.PluginContext("p").State)
	}
	if c.Global.State["a"] != 1 || c.PluginContext("p").State["x"] != 2 || c.Global.RequestID != "r" {
		t.Errorf("clone: %v %v", c.Global, c.PluginContext("p").State)
	}
}
