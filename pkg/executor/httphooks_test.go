package executor

import (
	"context"
	"encoding/json"
	"errors"
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
