package audit

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcp-extproc/mcp-extproc/pkg/logsafe"
)

func TestHash(t *testing.T) {
	// SHA-256 of the empty input and of "abc" (FIPS 180-2's test vector).
	for in, want := range map[string]string{
		"":    "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"abc": "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
	} {
		if got := Hash([]byte(in)); got != want {
			t.Errorf("Hash(%q) = %s, want %s", in, got, want)
		}
	}
}

// The native line has the documented snake_case names, carries no content
// unless filled, and decodes back to the event.
func TestNativeJSON(t *testing.T) {
	e := fullEvent()
	var enc Encoder
	line, err := enc.Encode(&e)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.IndexByte(line, '\n') != len(line)-1 {
		t.Fatalf("not one line: %q", line)
	}
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]any{
		"time": "2026-07-01T12:00:00Z", "request_id": "9f1c-req", "jsonrpc_id": "7", "session_id": "sess-1",
		"caller.subject": "alice", "caller.source": "jwt_metadata", "caller.verified": true, "method": "tools/call",
		"target": "delete_repo", "decision": "deny", "mode": "enforce", "decided_by.kind": "rule",
		"decided_by.name": "no-deletes", "violation.code": "FORBIDDEN_TOOL", "error_code": -32001.0,
		"duration_ns": 3e6, "arguments_hash": Hash([]byte(`{"repo":"x"}`)), "trace_id": e.TraceID, "phase": "request",
	} {
		if got, ok := lookup(m, path); !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", path, got, ok, want)
		}
	}
	if p := m["plugins"].([]any)[0].(map[string]any); p["duration_ns"] != 1.2e6 || p["hook"] != "tool_pre_invoke" {
		t.Errorf("plugins[0] = %v", p)
	}
	for _, absent := range []string{"content", "result_hash", "error"} {
		if _, ok := m[absent]; ok {
			t.Errorf("%s present, want absent", absent)
		}
	}
	var back Event
	if err := json.Unmarshal(line, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(e, back); diff != "" {
		t.Errorf("round trip (-sent +decoded):\n%s", diff)
	}

	allow := Event{Time: e.Time, Method: "tools/list", Decision: DecisionAllow, Mode: ModeEnforce,
		Caller: Caller{Source: SourceNone}}
	line, err = enc.Encode(&allow)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"time":"2026-07-01T12:00:00Z","caller":{"source":"none","verified":false},"method":"tools/list","decision":"allow","mode":"enforce"}` + "\n"
	if string(line) != want {
		t.Errorf("allow encodes as\n%s want\n%s", line, want)
	}
}

// Strings from a client cannot make a line unbounded; a zero time is
// stamped.
func TestEncodeBounds(t *testing.T) {
	e := Event{Method: "tools/call", Target: strings.Repeat("x", 1<<20), JSONRPCID: strings.Repeat("9", 1<<16)}
	for _, f := range []Format{FormatJSON, FormatOCSF} {
		enc := Encoder{Format: f}
		line, err := enc.Encode(&e)
		if err != nil {
			t.Fatal(err)
		}
		if len(line) > 16*logsafe.DefaultCap {
			t.Errorf("%s: line is %d bytes", f, len(line))
		}
		if !bytes.Contains(line, []byte("truncated")) {
			t.Errorf("%s: cut not marked", f)
		}
		var back struct {
			Time any `json:"time"`
		}
		if err := json.Unmarshal(line, &back); err != nil || back.Time == nil {
			t.Errorf("%s: time %v (%v)", f, back.Time, err)
		}
	}
	if len(e.Target) != 1<<20 {
		t.Error("Encode changed the caller's event")
	}
}

func TestParseFormat(t *testing.T) {
	for in, want := range map[string]Format{"": FormatJSON, "json": FormatJSON, "ocsf": FormatOCSF} {
		if got, err := ParseFormat(in); err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseFormat("cef"); err == nil {
		t.Error("ParseFormat(cef) succeeded")
	}
	enc := Encoder{Format: "cef"}
	e := fullEvent()
	if _, err := enc.Encode(&e); err == nil {
		t.Error("Encode with an unknown format succeeded")
	}
}

// OpenFile appends (two sinks, one after the other, keep both lines) and
// creates the file private to its owner.
func TestOpenFileAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	for _, id := range []string{"1", "2"} {
		s, err := OpenFile(path, FormatJSON, Product{})
		if err != nil {
			t.Fatal(err)
		}
		e := fullEvent()
		e.JSONRPCID = id
		if err := s.Write(t.Context(), &e); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"jsonrpc_id":"1"`) || !strings.Contains(lines[1], `"jsonrpc_id":"2"`) {
		t.Errorf("file holds %q", b)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	if _, err := OpenFile(filepath.Join(path, "sub"), FormatJSON, Product{}); err == nil {
		t.Error("OpenFile under a file succeeded")
	}
}

func TestIsList(t *testing.T) {
	for m, want := range map[string]bool{"tools/list": true, "resources/templates/list": true,
		"tools/call": false, "": false, "listing": false} {
		if IsList(m) != want {
			t.Errorf("IsList(%q) = %v", m, !want)
		}
	}
}
