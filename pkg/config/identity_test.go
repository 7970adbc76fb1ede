package config

import (
	"errors"
	"strings"
	"testing"
)

func TestIdentityConfig(t *testing.T) {
	const head = "plugins: []\nextproc:\n"
	for _, tc := range []struct {
		name, yaml string
		problems   []string // substrings, in order
		warnings   []string
	}{
		{name: "jwt defaults", yaml: "  identity:\n    sources:\n      - jwt_metadata: {key: jwt_payload}\n"},
		{name: "all kinds", yaml: `  identity:
    sources:
      - jwt_metadata: {key: p, claims: {tenant: '["https://acme.example/tenant"]', roles: realm_access.roles}}
      - peer_certificate: {trust_domains: [cluster.local]}
      - headers: {set_by_envoy: true, user: X-User, tenant: x-tenant-id}
`},
		{name: "legacy warns", yaml: "  user_header: x-user\n  tenant_header: x-tenant\n  server_header: x-server\n",
			warnings: []string{"extproc.server_header", "extproc.user_header: identity from request header \"x-user\"", "extproc.tenant_header"}},
		{name: "server header beside identity warns", yaml: "  server_header: x-server\n  identity:\n    sources:\n      - jwt_metadata: {key: p}\n",
			warnings: []string{"extproc.server_header: server_id from request header \"x-server\""}},
		{name: "legacy with identity", yaml: "  user_header: x-user\n  server_header: x-server\n  identity:\n    sources:\n      - jwt_metadata: {key: p}\n",
			problems: []string{"extproc.user_header: not used with extproc.identity"}},
		{name: "no sources", yaml: "  identity: {sources: []}\n", problems: []string{"extproc.identity.sources: required"}},
		{name: "empty source", yaml: "  identity:\n    sources: [{}]\n", problems: []string{"sources[0]: set one of"}},
		{name: "two kinds", yaml: "  identity:\n    sources:\n      - {jwt_metadata: {key: p}, headers: {set_by_envoy: true, user: x-u}}\n",
			problems: []string{"sources[0]: set only one of jwt_metadata, headers"}},
		{name: "jwt key and claims", yaml: "  identity:\n    sources:\n      - jwt_metadata: {claims: {user: 'a..b', roles: 'r ['}}\n",
			problems: []string{"jwt_metadata.key: required", "jwt_metadata.claims.user: claim path \"a..b\"", "jwt_metadata.claims.roles"}},
		{name: "peer", yaml: "  identity:\n    sources:\n      - peer_certificate: {attribute: source.address}\n      - peer_certificate: {trust_domains: ['spiffe://x']}\n",
			problems: []string{"sources[0].peer_certificate.attribute: must be", "sources[1].peer_certificate.trust_domains[0]"}},
		{name: "headers not declared", yaml: "  identity:\n    sources:\n      - headers: {user: x-user, roles: authorization, tenant: ':path'}\n",
			problems: []string{"headers.set_by_envoy: must be true", "headers.tenant: \":path\" is not a valid", "headers.roles: \"authorization\" carries credentials"}},
		{name: "headers without user", yaml: "  identity:\n    sources:\n      - headers: {set_by_envoy: true, email: x-email}\n",
			problems: []string{"headers: set user or tenant"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			problems, warnings := parseOutcome(t, head+tc.yaml)
			match(t, "problem", problems, tc.problems)
			if tc.problems == nil {
				match(t, "warning", only(warnings, "extproc."), tc.warnings)
			}
		})
	}
}

// parseOutcome parses yaml and returns the problems that refused it and
// the warnings it loaded (or was refused) with.
func parseOutcome(t *testing.T, yaml string) (problems, warnings []Problem) {
	t.Helper()
	cfg, err := Parse([]byte(yaml), nil)
	var verr *ValidationError
	switch {
	case errors.As(err, &verr):
		return verr.Problems, verr.Warnings
	case err != nil:
		t.Fatal(err)
	}
	return nil, cfg.Warnings
}

func only(ps []Problem, prefix string) []Problem {
	var out []Problem
	for _, p := range ps {
		if strings.HasPrefix(p.Field, prefix) {
			out = append(out, p)
		}
	}
	return out
}

func match(t *testing.T, what string, got []Problem, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d %ss, want %d: %q", len(got), what, len(want), got)
	}
	for i, w := range want {
		if !strings.Contains(got[i].String(), w) {
			t.Errorf("%s %d = %q, want it to contain %q", what, i, got[i], w)
		}
	}
}

func TestIdentityDefaults(t *testing.T) {
	cfg, err := Parse([]byte("plugins: []\nextproc:\n  identity:\n    sources:\n      - jwt_metadata: {key: p}\n      - peer_certificate: {}\n      - headers: {set_by_envoy: true, user: X-User}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Extproc.Identity.Sources
	if j := s[0].JWTMetadata; j.Namespace != DefaultJWTNamespace || j.Claims.User != "sub" || j.Claims.Email != "email" {
		t.Errorf("jwt defaults: %+v", j)
	}
	if s[1].PeerCertificate.Attribute != DefaultPeerAttribute {
		t.Errorf("peer default: %+v", s[1].PeerCertificate)
	}
	if s[2].Headers.User != "x-user" || s[2].Kind() != "headers" {
		t.Errorf("headers: %+v", s[2].Headers)
	}
}
