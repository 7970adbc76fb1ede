package identity

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/structwire"
)

func mustStruct(t *testing.T, js string) *structpb.Struct {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		t.Fatal(err)
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// resolver loads an extproc.identity block as the sidecar does.
func resolver(t *testing.T, yaml string) *Resolver {
	t.Helper()
	cfg, err := config.Parse([]byte("plugins: []\nextproc:\n  identity:\n    sources:\n"+yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(cfg.Extproc.Identity)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// jwtRequest puts payload (JSON) where jwt_authn puts it.
func jwtRequest(t *testing.T, key, payload string) *Request {
	ns := &structpb.Struct{Fields: map[string]*structpb.Value{key: structpb.NewStructValue(mustStruct(t, payload))}}
	return &Request{Metadata: encodeMetadata(t, map[string]*structpb.Struct{config.DefaultJWTNamespace: ns})}
}

// encodeMetadata is namespaces as Envoy sends them and the codec leaves
// them: encoded.
func encodeMetadata(t *testing.T, namespaces map[string]*structpb.Struct) structwire.Metadata {
	t.Helper()
	b, err := proto.Marshal(&corev3.Metadata{FilterMetadata: namespaces})
	if err != nil {
		t.Fatal(err)
	}
	md, err := structwire.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return md
}

func TestJWTClaims(t *testing.T) {
	const src = `      - jwt_metadata:
          key: jwt_payload
          claims: {tenant: '["https://acme.example/tenant"]', roles: realm_access.roles, teams: groups, name: name}
`
	r := resolver(t, src)
	long := strings.Repeat("x", MaxValueBytes+1)
	for _, tc := range []struct {
		name, key, payload string
		want               Identity
		ok                 bool
	}{
		{name: "full", key: "jwt_payload", ok: true,
			payload: `{"sub":"alice","email":"alice@acme.example","name":"Alice","https://acme.example/tenant":"acme","realm_access":{"roles":["dev","ops",7]},"groups":"team-a"}`,
			want: Identity{Source: SourceJWT, User: "alice", Email: "alice@acme.example", Name: "Alice", Tenant: "acme",
				Roles: []string{"dev", "ops"}, Teams: []string{"team-a"}}},
		{name: "numeric sub", key: "jwt_payload", payload: `{"sub":12345}`, ok: true, want: Identity{Source: SourceJWT, User: "12345"}},
		{name: "fractional sub", key: "jwt_payload", payload: `{"sub":1.5}`},
		{name: "tenant only", key: "jwt_payload", payload: `{"https://acme.example/tenant":"acme"}`, ok: true, want: Identity{Source: SourceJWT, Tenant: "acme"}},
		{name: "no sub", key: "jwt_payload", payload: `{"email":"a@b"}`},
		{name: "sub not a string", key: "jwt_payload", payload: `{"sub":{"id":"alice"}}`},
		{name: "sub too long", key: "jwt_payload", payload: `{"sub":"` + long + `"}`},
		{name: "sub with control", key: "jwt_payload", payload: `{"sub":"al\nice"}`},
		{name: "other key", key: "other", payload: `{"sub":"alice"}`},
		{name: "roles not a list", key: "jwt_payload", payload: `{"sub":"a","realm_access":{"roles":{"x":1}}}`, ok: true, want: Identity{Source: SourceJWT, User: "a"}},
		{name: "path through a non-object", key: "jwt_payload", payload: `{"sub":"a","realm_access":"admin"}`, ok: true, want: Identity{Source: SourceJWT, User: "a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := r.Resolve(jwtRequest(t, tc.key, tc.payload))
			if ok != tc.ok || !equal(got, tc.want) {
				t.Errorf("Resolve = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
			if !ok {
				return
			}
			claims, err := got.Claims.Decode()
			if err != nil || !proto.Equal(claims, mustStruct(t, tc.payload)) {
				t.Errorf("Claims = %v, %v; want the payload %s", claims, err, tc.payload)
			}
		})
	}
}

func TestManyRoles(t *testing.T) {
	r := resolver(t, "      - jwt_metadata: {key: p, claims: {roles: roles}}\n")
	roles := make([]string, 100)
	for i := range roles {
		roles[i] = `"r"`
	}
	got, _ := r.Resolve(jwtRequest(t, "p", `{"sub":"a","roles":[`+strings.Join(roles, ",")+`]}`))
	if len(got.Roles) != MaxListItems {
		t.Errorf("%d roles, want %d", len(got.Roles), MaxListItems)
	}
}

func equal(a, b Identity) bool {
	return a.Source == b.Source && a.User == b.User && a.Email == b.Email && a.Name == b.Name &&
		a.Tenant == b.Tenant && slices.Equal(a.Roles, b.Roles) && slices.Equal(a.Teams, b.Teams)
}

func peerRequest(id string) *Request {
	return &Request{Attributes: &structpb.Struct{Fields: map[string]*structpb.Value{
		config.DefaultPeerAttribute: structpb.NewStringValue(id)}}}
}

func TestPeer(t *testing.T) {
	any := resolver(t, "      - peer_certificate: {}\n")
	td := resolver(t, "      - peer_certificate: {trust_domains: [cluster.local]}\n")
	for _, tc := range []struct {
		r    *Resolver
		id   string
		want string
	}{
		{any, "spiffe://cluster.local/ns/a/sa/client", "spiffe://cluster.local/ns/a/sa/client"},
		{any, "urn:example:client", "urn:example:client"},
		{any, "", ""},
		{td, "spiffe://cluster.local/ns/a/sa/client", "spiffe://cluster.local/ns/a/sa/client"},
		{td, "spiffe://evil.example/ns/a/sa/client", ""},
		{td, "spiffe://cluster.local", ""},
		{td, "spiffe://cluster.local.evil/x", ""},
		{td, "https://cluster.local/x", ""},
	} {
		got, ok := tc.r.Resolve(peerRequest(tc.id))
		if got.User != tc.want || ok != (tc.want != "") || (ok && got.Source != SourcePeer) {
			t.Errorf("peer %q: %+v, %v; want user %q", tc.id, got, ok, tc.want)
		}
	}
	if _, ok := any.Resolve(&Request{}); ok {
		t.Error("no attributes: an identity")
	}
}

func TestOrderAndNoMixing(t *testing.T) {
	r := resolver(t, `      - jwt_metadata: {key: p}
      - peer_certificate: {}
      - headers: {set_by_envoy: true, user: x-user, tenant: x-tenant, roles: x-roles, name: x-user-name}
`)
	hdrs := map[string]string{"x-user": "mallory", "x-tenant": "victim", "x-roles": "admin, ops ,", "x-user-name": "Mallory"}
	header := func(n string) (string, bool) { v, ok := hdrs[n]; return v, ok }
	req := jwtRequest(t, "p", `{"sub":"alice"}`)
	req.Header = header
	req.Attributes = peerRequest("spiffe://x/y").Attributes
	got, _ := r.Resolve(req)
	if got.User != "alice" || got.Tenant != "" || got.Source != SourceJWT {
		t.Errorf("JWT first, nothing mixed in: %+v", got)
	}
	req.Metadata = nil
	if got, _ = r.Resolve(req); got.User != "spiffe://x/y" || got.Tenant != "" {
		t.Errorf("peer second: %+v", got)
	}
	req.Attributes = nil
	got, _ = r.Resolve(req)
	if got.User != "mallory" || got.Tenant != "victim" || !slices.Equal(got.Roles, []string{"admin", "ops"}) || got.Name != "Mallory" || got.Source != SourceHeaders {
		t.Errorf("headers last: %+v", got)
	}
	if !slices.Equal(r.Headers(), []string{"x-user", "x-user-name", "x-tenant", "x-roles"}) {
		t.Errorf("Headers() = %q", r.Headers())
	}
	req.Header = func(string) (string, bool) { return "", false }
	if got, ok := r.Resolve(req); ok {
		t.Errorf("nothing: %+v", got)
	}
}

func TestApply(t *testing.T) {
	g := cpex.GlobalContext{User: json.RawMessage(`"spoofed"`), TenantID: "spoofed"}
	id := Identity{Source: SourceJWT, User: "alice", Email: "a@x", Tenant: "acme", Roles: []string{"dev"}}
	id.Apply(&g)
	if string(g.User) != `{"id":"alice","email":"a@x","is_admin":false}` || g.TenantID != "acme" {
		t.Errorf("user %s tenant %q", g.User, g.TenantID)
	}
	uc := g.UserContext
	if uc == nil || uc.UserID != "alice" || uc.AuthMethod != "jwt" || uc.TeamID != "acme" || !slices.Equal(uc.Roles, []string{"dev"}) {
		t.Errorf("user_context %+v", uc)
	}
	(&Identity{Source: SourceJWT, Tenant: "t"}).Apply(&g)
	if g.User != nil || g.UserContext != nil || g.TenantID != "t" {
		t.Errorf("tenant only: %+v", g)
	}
}

func TestNil(t *testing.T) {
	if r, err := New(nil); r != nil || err != nil {
		t.Errorf("New(nil) = %v, %v", r, err)
	}
	if _, err := New(&config.Identity{Sources: []config.IdentitySource{{Headers: &config.HeaderIdentitySource{User: "x"}}}}); err == nil {
		t.Error("an undeclared header source compiled")
	}
}
