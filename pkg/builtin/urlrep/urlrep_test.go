package urlrep

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// readme is the configuration of cpex-plugins' url_reputation README.
var readme = map[string]any{
	"whitelist_domains":   []any{"example.com"},
	"allowed_patterns":    []any{`^https://trusted\.internal/.*`},
	"blocked_domains":     []any{"malicious.example.com"},
	"blocked_patterns":    []any{"casino", "crypto"},
	"use_heuristic_check": false, "entropy_threshold": 3.65, "block_non_secure_http": true,
}

func TestCheck(t *testing.T) {
	heur := map[string]any{"use_heuristic_check": true, "blocked_patterns": []any{"casino"}}
	tests := []struct {
		name string
		cfg  map[string]any
		uri  string
		want string // the violation's reason, "" passes
	}{
		{"whitelisted domain", readme, "http://example.com/x", ""},
		{"whitelisted parent wins over a blocked subdomain", readme, "https://malicious.example.com/", ""},
		{"allowed pattern passes plain http", map[string]any{"allowed_patterns": []any{`^http://trusted\.internal/.*`}}, "http://trusted.internal/a", ""},
		{"plain http", readme, "http://news.site.org/a", "Blocked non secure http url"},
		{"blocked domain", map[string]any{"blocked_domains": []any{"Malicious.Example.COM"}}, "https://api.malicious.example.com/x", "Domain in blocked set"},
		{"blocked pattern", readme, "https://best-casino.site.org/", "Blocked pattern"},
		{"clean https", readme, "https://docs.python.org/3/", ""},
		{"not a URL", readme, "not a url", "Could not parse url"},
		{"no host", readme, "file:///etc/passwd", "Could not parse domain"},
		{"http allowed when asked", map[string]any{"block_non_secure_http": false}, "http://a.org/", ""},
		{"generated-looking domain", heur, "https://xj4k9q2z7v1wb8.com/", "High entropy domain"},
		{"unknown TLD", heur, "https://example.notatld/", "Illegal TLD"},
		{"mixed scripts", heur, "https://p\u0430ypal.com/", "Domain unicode is not secure"},
		{"one non-Latin script", heur, "https://пример.рф/", ""},
		{"IP hosts skip heuristics", heur, "https://203.0.113.7/", ""},
		{"heuristics pass a plain domain", heur, "https://github.com/", ""},
		{"patterns before heuristics", heur, "https://casino.notatld/", "Blocked pattern"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _, err := New(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			payload, _ := json.Marshal(map[string]any{"uri": tt.uri, "metadata": map[string]any{}})
			res, err := p.Invoke(context.Background(), cpex.ResourcePreFetch, payload, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if res != nil {
				if res.Continue() || res.Violation.Code != "URL_REPUTATION_BLOCK" {
					t.Fatalf("result %+v", res)
				}
				got = res.Violation.Reason
			}
			if got != tt.want {
				t.Errorf("%s: got %q, want %q", tt.uri, got, tt.want)
			}
		})
	}
}

func TestConfig(t *testing.T) {
	if _, issues, err := New(readme); err != nil || len(issues) > 0 {
		t.Errorf("README config: %v %v", issues, err)
	}
	if _, _, err := New(map[string]any{"blocked_patterns": []any{"(?!x)"}}); err == nil || !strings.Contains(err.Error(), "blocked_patterns[0]") {
		t.Errorf("a pattern RE2 cannot compile: %v", err)
	}
	if _, issues, _ := New(map[string]any{"whitelist": []any{"a"}}); len(issues) != 1 || !issues[0].Warning {
		t.Errorf("unknown key: %+v", issues)
	}
}
