package processor_test

import (
	"net/http"
	"slices"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mcp-extproc/mcp-extproc/internal/envoytest"
	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// Two plugins on tool_pre_invoke: "watcher" runs always and records the
// context it got; "spoofed" runs only for a user matching "mallory", the
// user a client claims with x-user.
const identityPlugins = `
plugins:
  - name: watcher
    kind: external
    hooks: [tool_pre_invoke, tool_post_invoke]
    mcp: {proto: STREAMABLEHTTP, url: "${PLUGIN_URL}"}
  - name: spoofed
    kind: external
    hooks: [tool_pre_invoke]
    conditions: [{user_patterns: [mallory]}]
    mcp: {proto: STREAMABLEHTTP, url: "${PLUGIN_URL}"}
  - name: acme
    kind: external
    hooks: [tool_pre_invoke]
    conditions: [{tenant_ids: [acme]}]
    mcp: {proto: STREAMABLEHTTP, url: "${PLUGIN_URL}"}
plugin_settings:
  plugin_timeout: 5
`

const identitySources = `
extproc:
  identity:
    sources:
      - jwt_metadata:
          key: jwt_payload
          claims: {tenant: '["https://acme.example/tenant"]', roles: roles}
      - peer_certificate: {trust_domains: [cluster.local]}
`

// forwarding is what envoy/envoy.yaml's ext_proc filter forwards.
var forwarding = envoytest.Forwarding{
	MetadataNamespaces: []string{"envoy.filters.http.jwt_authn"},
	RequestAttributes:  []string{"connection.uri_san_peer_certificate"},
}

// verifiedJWT is what jwt_authn leaves in dynamic metadata for a token it
// verified, with payload_in_metadata: jwt_payload.
func verifiedJWT(t *testing.T, claims map[string]any) map[string]*structpb.Struct {
	t.Helper()
	ns, err := structpb.NewStruct(map[string]any{"jwt_payload": claims})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]*structpb.Struct{"envoy.filters.http.jwt_authn": ns}
}

func TestIdentityAcceptance(t *testing.T) {
	watcher := plugintest.NewScripted("watcher")
	spoofed := plugintest.NewScripted("spoofed")
	acme := plugintest.NewScripted("acme")
	h := newHarness(t, identityPlugins+identitySources, watcher, spoofed, acme)
	h.filter.Forwarding = forwarding
	legacy := newHarness(t, identityPlugins+"extproc:\n  user_header: x-user\n  tenant_header: x-tenant-id\n", watcher, spoofed, acme)
	legacy.filter.Forwarding = forwarding
	up := jsonUpstream(http.StatusOK, `{"jsonrpc":"2.0","id":3,"result":{"content":[]}}`)
	spoof := []string{"X-User", "mallory", "X-Tenant-Id", "acme"}
	jwt := map[string]any{"sub": "alice", "email": "alice@acme.example", "https://acme.example/tenant": "acme", "roles": []any{"dev"}}

	for _, tc := range []struct {
		name      string
		h         *harness
		info      envoytest.StreamInfo
		user      string // the user object's id, "" for none
		tenant    string
		spoofRuns bool
		acmeRuns  bool
	}{
		{name: "verified JWT beside a spoofed x-user", h: h, info: envoytest.StreamInfo{DynamicMetadata: verifiedJWT(t, jwt)},
			user: "alice", tenant: "acme", acmeRuns: true},
		{name: "JWT without a tenant: the spoofed tenant is not mixed in", h: h,
			info: envoytest.StreamInfo{DynamicMetadata: verifiedJWT(t, map[string]any{"sub": "alice"})}, user: "alice"},
		{name: "mTLS peer", h: h, info: envoytest.StreamInfo{Attributes: map[string]*structpb.Value{
			"connection.uri_san_peer_certificate": structpb.NewStringValue("spiffe://cluster.local/ns/a/sa/agent")}},
			user: "spiffe://cluster.local/ns/a/sa/agent"},
		{name: "peer of another trust domain", h: h, info: envoytest.StreamInfo{Attributes: map[string]*structpb.Value{
			"connection.uri_san_peer_certificate": structpb.NewStringValue("spiffe://evil.example/ns/a/sa/agent")}},
			spoofRuns: true},
		// With no user, user_patterns does not filter (as in cpex), so
		// "spoofed" runs; it must see no user, not mallory.
		{name: "no metadata, no trusted header", h: h, spoofRuns: true},
		{name: "legacy headers believe the client", h: legacy, info: envoytest.StreamInfo{DynamicMetadata: verifiedJWT(t, jwt)},
			spoofRuns: true, acmeRuns: true, tenant: "acme"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, p := range []*plugintest.Scripted{watcher, spoofed, acme} {
				p.Reset()
			}
			req := mcpPost(echoCall, spoof...)
			req.Info = tc.info
			res := tc.h.do(req, up)
			if res.Status != http.StatusOK || res.Immediate {
				t.Fatalf("status %d immediate %v: %s", res.Status, res.Immediate, res.Body)
			}
			calls := watcher.Calls()
			if len(calls) != 2 {
				t.Fatalf("watcher called %d times, want pre and post", len(calls))
			}
			for _, c := range calls {
				checkIdentity(t, c.Hook, c.Context.GlobalContext, tc.user, tc.tenant, tc.h == legacy)
			}
			if got := spoofed.CallCount() == 1; got != tc.spoofRuns {
				t.Errorf("the user_patterns [mallory] plugin ran: %v, want %v", got, tc.spoofRuns)
			}
			for _, c := range spoofed.Calls() {
				checkIdentity(t, c.Hook, c.Context.GlobalContext, tc.user, tc.tenant, tc.h == legacy)
			}
			if got := acme.CallCount() == 1; got != tc.acmeRuns {
				t.Errorf("the tenant_ids [acme] plugin ran: %v, want %v", got, tc.acmeRuns)
			}
		})
	}
}

// checkIdentity checks the user, user_context and tenant_id a hook saw.
func checkIdentity(t *testing.T, hook cpex.HookType, g cpex.GlobalContext, user, tenant string, legacy bool) {
	t.Helper()
	if legacy {
		if string(g.User) != `"mallory"` || g.UserContext != nil || g.TenantID != tenant {
			t.Errorf("%s: legacy user %s user_context %+v tenant %q", hook, g.User, g.UserContext, g.TenantID)
		}
		return
	}
	if g.TenantID != tenant {
		t.Errorf("%s: tenant_id %q, want %q", hook, g.TenantID, tenant)
	}
	if user == "" {
		if g.User != nil || g.UserContext != nil {
			t.Errorf("%s: user %s user_context %+v, want none", hook, g.User, g.UserContext)
		}
		return
	}
	uc := g.UserContext
	if uc == nil || uc.UserID != user {
		t.Fatalf("%s: user_context %+v, want user_id %q", hook, uc, user)
	}
	if !jsonEqual(t, g.User, userObject(user, uc.Email)) {
		t.Errorf("%s: user %s", hook, g.User)
	}
	if user == "alice" && (uc.AuthMethod != "jwt" || (tenant != "" && !slices.Equal(uc.Roles, []string{"dev"}))) {
		t.Errorf("%s: user_context %+v", hook, uc)
	}
}

func userObject(id, email string) []byte {
	if email == "" {
		return []byte(`{"id":"` + id + `","is_admin":false}`)
	}
	return []byte(`{"id":"` + id + `","email":"` + email + `","is_admin":false}`)
}

// TestIdentityFromEnvoyHeaders: a headers source declared set by Envoy is
// believed once, never when the header comes twice (which copy did Envoy
// set?), and never over a verified JWT listed before it.
func TestIdentityFromEnvoyHeaders(t *testing.T) {
	watcher := plugintest.NewScripted("watcher")
	spoofed := plugintest.NewScripted("spoofed")
	acme := plugintest.NewScripted("acme")
	h := newHarness(t, identityPlugins+`
extproc:
  identity:
    sources:
      - jwt_metadata: {key: jwt_payload}
      - headers: {set_by_envoy: true, user: x-user, tenant: x-tenant-id}
`, watcher, spoofed, acme)
	h.filter.Forwarding = forwarding
	up := jsonUpstream(http.StatusOK, `{"jsonrpc":"2.0","id":3,"result":{"content":[]}}`)
	for _, tc := range []struct {
		name         string
		headers      []string
		info         envoytest.StreamInfo
		user, tenant string
	}{
		{name: "set by Envoy", headers: []string{"X-User", "bob", "X-Tenant-Id", "acme"}, user: "bob", tenant: "acme"},
		{name: "sent twice", headers: []string{"X-User", "bob", "X-User", "mallory"}},
		{name: "JWT first", headers: []string{"X-User", "bob", "X-Tenant-Id", "acme"},
			info: envoytest.StreamInfo{DynamicMetadata: verifiedJWT(t, map[string]any{"sub": "alice"})}, user: "alice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			watcher.Reset()
			req := mcpPost(echoCall, tc.headers...)
			req.Info = tc.info
			h.do(req, up)
			calls := watcher.Calls()
			if len(calls) == 0 {
				t.Fatal("watcher not called")
			}
			checkIdentity(t, calls[0].Hook, calls[0].Context.GlobalContext, tc.user, tc.tenant, false)
		})
	}
}
