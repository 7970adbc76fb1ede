package config

import (
	"strings"
	"testing"
)

// TestHookWarnings: the hooks the sidecar runs load without a warning, the
// ones it cannot run (agent_*) warn by name, and identity_resolve and
// token_delegate warn where cpex cannot answer them (gRPC, Unix socket).
func TestHookWarnings(t *testing.T) {
	const mcp = "  mcp: {proto: STREAMABLEHTTP, url: 'http://a/mcp'}\n"
	const grpc = "  grpc: {target: 'a:50051'}\n"
	for _, tc := range []struct {
		hook, transport string
		warn            string // "" for none
	}{
		{"http_pre_request", mcp, ""},
		{"http_post_request", mcp, ""},
		{"http_auth_resolve_user", mcp, ""},
		{"http_auth_check_permission", mcp, ""},
		{"token_delegate", mcp, ""},
		{"token_delegate", grpc, "use mcp"},
		{"identity_resolve", mcp, ""},
		{"identity_resolve", grpc, "use mcp"},
		{"agent_pre_invoke", mcp, "never fires"},
	} {
		t.Run(tc.hook, func(t *testing.T) {
			c, err := Parse([]byte("plugins:\n- name: a\n  kind: external\n  hooks: ["+tc.hook+"]\n"+tc.transport), nil)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			msg, ok := wheres(c.Warnings)[where{"a", "hooks[0]"}]
			if ok != (tc.warn != "") || !strings.Contains(msg, tc.warn) {
				t.Errorf("warning %q (present %v), want one containing %q", msg, ok, tc.warn)
			}
		})
	}
}
