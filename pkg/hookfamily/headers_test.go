package hookfamily

import (
	"testing"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// TestHeaderPolicy is the header policy over every hook cpex knows: which
// hooks set headers at all, and for those, each class of header. Editing
// the policy for one hook or one header alone fails a row.
func TestHeaderPolicy(t *testing.T) {
	// The header classes, each with a header of it and whether it was in
	// the client's request.
	type class struct {
		name, header, value string
		clientSent          bool
	}
	classes := []class{
		{"ordinary", "x-tenant-route", "blue", false},
		{"ordinary, replaced", "x-tenant-route", "blue", true},
		{"credential the client did not send", "authorization", "Bearer t", false},
		{"credential the client sent", "authorization", "Bearer t", true},
		{"cookie set by the server", "set-cookie", "a=b", true},
		{"pseudo-header", ":path", "/x", false},
		{"host", "host", "evil", false},
		{"envoy's", "x-envoy-original-path", "/x", false},
		{"framing", "content-length", "3", false},
		{"body encoding", "content-encoding", "gzip", true},
		{"hop-by-hop", "connection", "close", false},
		{"mcp session", "mcp-session-id", "other", true},
		{"mcp version", "mcp-protocol-version", "2025-03-26", true},
		{"mcp method", "mcp-method", "ping", true},
		{"mcp param", "mcp-param-account", "x", true},
		{"resumed stream", "last-event-id", "1", false},
		{"bad name", "x y", "v", false},
		{"bad value", "x-a", "v\r\nx-b: w", false},
	}
	// want[setter][class]: may the header be set.
	want := map[HeaderSetter][]bool{
		SetsNoHeaders:   {false, false, false, false, false, false, false, false, false, false, false, false, false, false, false, false, false, false},
		SetsHeaders:     {true, true, true, false, false, false, false, false, false, false, false, false, false, false, false, false, false, false},
		SetsCredentials: {true, true, true, true, true, false, false, false, false, false, false, false, false, false, false, false, false, false},
	}
	setters := map[cpex.HookType]HeaderSetter{
		cpex.ToolPreInvoke: SetsHeaders, cpex.PromptPreFetch: SetsHeaders, cpex.ResourcePreFetch: SetsHeaders,
		cpex.HTTPPreRequest: SetsHeaders, cpex.HTTPPostRequest: SetsHeaders, cpex.TokenDelegate: SetsCredentials,
	}
	for _, hook := range cpex.KnownHooks() {
		setter := setters[hook] // SetsNoHeaders for every other hook
		if got := HeadersOf(hook); got != setter {
			t.Errorf("HeadersOf(%s) = %d, want %d", hook, got, setter)
		}
		for i, c := range classes {
			if got := MaySetHeader(hook, c.header, c.value, c.clientSent, false); got != want[setter][i] {
				t.Errorf("%s, %s (%s): may set = %v, want %v", hook, c.name, c.header, got, want[setter][i])
			}
		}
	}
	// allow_credential_headers lets a header-setting hook replace the
	// client's credential, nothing reserved.
	if !MaySetHeader(cpex.HTTPPreRequest, "authorization", "Bearer t", true, true) {
		t.Error("allow_credential_headers: http_pre_request may not replace authorization")
	}
	if MaySetHeader(cpex.HTTPPreRequest, "mcp-session-id", "s", true, true) {
		t.Error("allow_credential_headers: http_pre_request may set mcp-session-id")
	}
}

// TestReserved: Envoy's rule for its own headers is the prefix, with or
// without a dash after it.
func TestReserved(t *testing.T) {
	for name, want := range map[string]bool{
		":authority": true, "x-envoy": true, "x-envoyfoo": true, "x-envoy-original-path": true,
		"x-envo": false, "x-guard": false, "authorization": false, "mcp-param-a": true, "mcp-paramx": false,
		"": true, "transfer-encoding": true, "proxy-connection": true,
	} {
		if got := Reserved(name); got != want {
			t.Errorf("Reserved(%q) = %v, want %v", name, got, want)
		}
	}
}
