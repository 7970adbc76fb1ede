package processor_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mcp-extproc/mcp-extproc/internal/envoytest"
	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// clientHooks are the hooks whose payloads carry the caller's address.
var clientHooks = []cpex.HookType{cpex.HTTPPreRequest, cpex.HTTPAuthResolveUser, cpex.IdentityResolve,
	cpex.HTTPAuthCheckPermission, cpex.HTTPPostRequest}

const clientConfig = `
plugins:
  - name: peer
    kind: external
    hooks: [http_pre_request, http_auth_resolve_user, identity_resolve, http_auth_check_permission, http_post_request]
    mcp: {proto: STREAMABLEHTTP, url: "${PLUGIN_URL}"}
plugin_settings:
  plugin_timeout: 5
`

// TestClientAddress: through the strict fake Envoy, the HTTP hooks get
// client_host and client_port from the attributes source.address and
// source.port when the filter's request_attributes lists them (the
// permission check gets client_host only, as ContextForge's payload has
// no port); never from x-forwarded-for, and not at all when the filter
// does not ask Envoy for them.
func TestClientAddress(t *testing.T) {
	for _, tc := range []struct {
		name  string
		attrs []string
		info  map[string]*structpb.Value
		host  string
		port  int
	}{
		{name: "forwarded", attrs: []string{"source.address", "source.port"},
			info: map[string]*structpb.Value{"source.address": structpb.NewStringValue("10.0.0.7:5555"), "source.port": structpb.NewNumberValue(5555)},
			host: "10.0.0.7", port: 5555},
		{name: "IPv6, port from the address", attrs: []string{"source.address"},
			info: map[string]*structpb.Value{"source.address": structpb.NewStringValue("[fd00::1]:40000"), "source.port": structpb.NewNumberValue(1)},
			host: "fd00::1", port: 40000},
		{name: "not asked of Envoy",
			info: map[string]*structpb.Value{"source.address": structpb.NewStringValue("10.0.0.7:5555"), "source.port": structpb.NewNumberValue(5555)}},
		{name: "a port out of range", attrs: []string{"source.address", "source.port"},
			info: map[string]*structpb.Value{"source.address": structpb.NewStringValue("10.0.0.7"), "source.port": structpb.NewNumberValue(70000)},
			host: "10.0.0.7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			peer := plugintest.NewScripted("peer", clientHooks...)
			h := newHarness(t, clientConfig, peer)
			h.filter.Forwarding = envoytest.Forwarding{RequestAttributes: tc.attrs}
			req := mcpPost(echoCall, "Authorization", "Bearer some-token", "X-Forwarded-For", "203.0.113.9")
			req.Info = envoytest.StreamInfo{Attributes: tc.info}
			if res := h.do(req, jsonUpstream(http.StatusOK, `{"jsonrpc":"2.0","id":3,"result":{"content":[]}}`)); res.Status != http.StatusOK {
				t.Fatalf("status %d %s", res.Status, res.Body)
			}
			seen := map[cpex.HookType]bool{}
			for _, c := range peer.Calls() {
				seen[c.Hook] = true
				var p struct {
					Host *string `json:"client_host"`
					Port *int    `json:"client_port"`
				}
				if err := json.Unmarshal(c.Payload, &p); err != nil {
					t.Fatal(err)
				}
				wantPort := tc.port
				if c.Hook == cpex.HTTPAuthCheckPermission {
					wantPort = 0
				}
				if got := deref(p.Host); got != tc.host {
					t.Errorf("%s: client_host %q, want %q", c.Hook, got, tc.host)
				}
				if got := deref(p.Port); got != wantPort {
					t.Errorf("%s: client_port %d, want %d", c.Hook, got, wantPort)
				}
			}
			for _, hook := range clientHooks {
				if !seen[hook] {
					t.Errorf("%s not called", hook)
				}
			}
		})
	}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
