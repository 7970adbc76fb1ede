package sidecar

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
	"github.com/mcp-extproc/mcp-extproc/pkg/metrics"
)

// Both plugin sets the executor may get, the plain and the traced one,
// tell it which plugins cannot block.
var (
	_ executor.NonBlocking = (*pluginSet)(nil)
	_ executor.NonBlocking = (*tracedPlugins)(nil)
)

// TestNonBlockingBuiltins: the plugin set tells the executor that the
// built-ins that only compute cannot block (pkg/builtin's tests say which
// do), and nothing else: not an external plugin; a reload keeps that for
// the plugins whose clients it reuses.
func TestNonBlockingBuiltins(t *testing.T) {
	const yaml = `plugins:
  - name: Deny
    kind: plugins.deny_filter.deny.DenyListPlugin
    hooks: [tool_pre_invoke]
    config: {words: [bad]}
  - name: LimitMemory
    kind: plugins.rate_limiter.rate_limiter.RateLimiterPlugin
    hooks: [tool_pre_invoke]
    config: {by_user: 10/m}
  - name: Remote
    kind: external
    hooks: [tool_pre_invoke]
    mcp: {proto: STREAMABLEHTTP, url: "http://127.0.0.1:1/mcp"}
`
	cfg, err := config.Parse([]byte(yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New(prometheus.NewRegistry())
	set, created, _, err := buildPluginSet(cfg, nil, zerolog.Nop(), m)
	if err != nil {
		t.Fatal(err)
	}
	defer closeClients(context.Background(), created)
	want := map[string]bool{"Deny": true, "LimitMemory": true, "Remote": false, "Unknown": false}
	check := func(s *pluginSet) {
		t.Helper()
		for name, nb := range want {
			if got := s.NonBlocking(name) != nil; got != nb {
				t.Errorf("NonBlocking(%s) = %v, want %v", name, got, nb)
			}
		}
	}
	check(set)

	next, created2, _, err := buildPluginSet(cfg, set, zerolog.Nop(), m)
	if err != nil {
		t.Fatal(err)
	}
	defer closeClients(context.Background(), created2)
	if len(created2) != 0 {
		t.Fatalf("the same config made %d new clients", len(created2))
	}
	check(next)
}

// TestAllBuiltin: the snapshot builds no plugin headers (InProcessOnly)
// only when no plugin is reached over a transport.
func TestAllBuiltin(t *testing.T) {
	deny := config.Plugin{Name: "Deny", Kind: "plugins.deny_filter.deny.DenyListPlugin"}
	ext := config.Plugin{Name: "Policy", Kind: config.KindExternal}
	for _, tc := range []struct {
		name    string
		plugins []config.Plugin
		want    bool
	}{
		{"none", nil, true},
		{"built-ins only", []config.Plugin{deny, deny}, true},
		{"an external plugin", []config.Plugin{ext}, false},
		{"mixed", []config.Plugin{deny, ext}, false},
	} {
		if got := allBuiltin(tc.plugins); got != tc.want {
			t.Errorf("%s: allBuiltin = %v, want %v", tc.name, got, tc.want)
		}
	}
}
