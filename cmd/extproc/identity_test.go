package main

import (
	"strings"
	"testing"
)

// TestCheckConfigIdentity: --check-config names what is wrong with
// extproc.identity, and warns about identity headers a client can send.
func TestCheckConfigIdentity(t *testing.T) {
	bad := writeFile(t, validConfig+`extproc:
  user_header: x-user
  identity:
    sources:
      - headers: {user: x-user}
      - jwt_metadata: {claims: {tenant: "a..b"}}
`)
	r := runFor(t, []string{"--config", bad, "--check-config"}, env(nil))
	if r.code != 1 {
		t.Errorf("exit %d, want 1", r.code)
	}
	for _, want := range []string{
		"extproc.user_header: not used with extproc.identity",
		"extproc.identity.sources[0].headers.set_by_envoy: must be true",
		"extproc.identity.sources[1].jwt_metadata.key: required",
		`extproc.identity.sources[1].jwt_metadata.claims.tenant: claim path "a..b"`,
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}

	legacy := writeFile(t, validConfig+"extproc:\n  user_header: x-user\n")
	r = runFor(t, []string{"--config", legacy, "--check-config"}, env(nil))
	if r.code != 0 || !strings.Contains(r.stdout, `warning: extproc.user_header: identity from request header "x-user", which any client can send`) {
		t.Errorf("legacy header: exit %d stdout %q stderr %q, want 0 with a warning", r.code, r.stdout, r.stderr)
	}
}
