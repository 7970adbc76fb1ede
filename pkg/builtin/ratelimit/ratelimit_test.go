package ratelimit

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-extproc/mcp-extproc/internal/redistest"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// clock is a fake time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func ctxFor(user, tenant string) *cpex.PluginContext {
	g := cpex.GlobalContext{RequestID: "r", TenantID: tenant}
	if user != "" {
		g.User, _ = json.Marshal(user)
	}
	return cpex.NewContext(g)
}

// call runs tool_pre_invoke for tool as user in tenant; it returns "" when
// allowed, else the violation's code and dimension.
func call(t *testing.T, p *Plugin, tool, user, tenant string) string {
	t.Helper()
	res, err := p.Invoke(context.Background(), cpex.ToolPreInvoke, json.RawMessage(`{"name":"`+tool+`","args":{}}`), ctxFor(user, tenant))
	if err != nil {
		t.Fatal(err)
	}
	if res == nil || res.Continue() {
		return ""
	}
	return fmt.Sprintf("%s/%v", res.Violation.Code, res.Violation.Details["dimension"])
}

func TestParseRate(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Rate
		err  bool
	}{
		{"60/m", Rate{60, time.Minute}, false},
		{"10/sec", Rate{10, time.Second}, false},
		{" 5 / hour", Rate{5, time.Hour}, false},
		{"1000000/h", Rate{1000000, time.Hour}, false},
		{"1000001/h", Rate{}, true},
		{"0/m", Rate{}, true},
		{"60", Rate{}, true},
		{"60/d", Rate{}, true},
	} {
		got, err := ParseRate(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("ParseRate(%q) = %v, %v", tt.in, got, err)
		}
	}
}

// TestMemory: the README's examples, on the memory backend with a fake
// clock.
func TestMemory(t *testing.T) {
	type step struct {
		advance            time.Duration
		tool, user, tenant string
		want               string
	}
	tests := []struct {
		name  string
		cfg   map[string]any
		steps []step
	}{
		{"by_user, fixed window", map[string]any{"by_user": "2/m"}, []step{
			{0, "t", "alice", "", ""}, {0, "t", "alice", "", ""}, {0, "t", "alice", "", "RATE_LIMIT/user"},
			{0, "t", "bob", "", ""}, // users are counted apart
			{time.Minute, "t", "alice", "", ""},
		}},
		{"anonymous callers share a budget", map[string]any{"by_user": "1/s"}, []step{
			{0, "t", "", "", ""}, {0, "t", "", "", "RATE_LIMIT/user"},
		}},
		{"by_tenant", map[string]any{"by_user": "30/m", "by_tenant": "2/m"}, []step{
			{0, "t", "a", "acme", ""}, {0, "t", "b", "acme", ""}, {0, "t", "c", "acme", "RATE_LIMIT/tenant"},
			{0, "t", "c", "other", ""},
		}},
		{"by_tool", map[string]any{"by_user": "30/m", "by_tool": map[string]any{"search": "1/m", "summarise": "5/m"}}, []step{
			{0, "search", "a", "", ""}, {0, "search", "b", "", "RATE_LIMIT/tool"}, {0, "other", "a", "", ""},
		}},
		{"sliding window", map[string]any{"by_user": "2/m", "algorithm": "sliding_window"}, []step{
			{0, "t", "a", "", ""}, {30 * time.Second, "t", "a", "", ""}, {20 * time.Second, "t", "a", "", "RATE_LIMIT/user"},
			{11 * time.Second, "t", "a", "", ""}, // the first left the window
			{0, "t", "a", "", "RATE_LIMIT/user"},
		}},
		{"token bucket", map[string]any{"by_user": "2/m", "algorithm": "token_bucket"}, []step{
			{0, "t", "a", "", ""}, {0, "t", "a", "", ""}, {0, "t", "a", "", "RATE_LIMIT/user"},
			{30 * time.Second, "t", "a", "", ""}, // one token refilled
			{0, "t", "a", "", "RATE_LIMIT/user"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &clock{t: time.Unix(1_800_000_000, 0)}
			p, _, err := newWith(tt.cfg, c.now)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tt.steps {
				c.add(s.advance)
				if got := call(t, p, s.tool, s.user, s.tenant); got != s.want {
					t.Fatalf("step %d (%+v): got %q, want %q", i, s, got, s.want)
				}
			}
		})
	}
}

func TestViolation(t *testing.T) {
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	p, _, err := newWith(map[string]any{"by_user": "1/m"}, c.now)
	if err != nil {
		t.Fatal(err)
	}
	call(t, p, "t", "alice", "")
	c.add(20 * time.Second)
	res, _ := p.Invoke(context.Background(), cpex.ToolPreInvoke, json.RawMessage(`{"name":"t"}`), ctxFor("alice", ""))
	v := res.Violation
	if v.Reason != "Rate limit exceeded" || *v.HTTPStatusCode != 429 || v.HTTPHeaders["Retry-After"] != "40" ||
		v.HTTPHeaders["X-RateLimit-Limit"] != "1" || v.HTTPHeaders["X-RateLimit-Remaining"] != "0" ||
		v.HTTPHeaders["X-RateLimit-Reset"] != fmt.Sprint(1_800_000_060) {
		t.Errorf("violation %+v", v)
	}
}

func TestUserOf(t *testing.T) {
	for _, tt := range []struct{ user, want string }{
		{`"alice"`, "alice"}, {`{"email":"a@x.io","id":"7"}`, "a@x.io"}, {`{"id":7}`, "7"}, {`{"sub":" s "}`, "s"}, {`{}`, "anonymous"}, {``, "anonymous"},
	} {
		if got := userOf(cpex.GlobalContext{User: json.RawMessage(tt.user)}); got != tt.want {
			t.Errorf("userOf(%s) = %q, want %q", tt.user, got, tt.want)
		}
	}
}

func TestConfig(t *testing.T) {
	tests := []struct {
		name, problem, warning string
		cfg                    map[string]any
	}{
		{name: "README", cfg: map[string]any{"by_user": "30/m", "by_tenant": "300/m", "by_tool": map[string]any{"search": "10/m"},
			"algorithm": "fixed_window", "backend": "memory", "fail_mode": "open"}},
		{name: "ContextForge's redis entry", cfg: map[string]any{"backend": "redis", "redis_url": "redis://redis:6379/0",
			"redis_key_prefix": "rl", "algorithm": "fixed_window", "by_user": "30/m", "by_tenant": "3000/m", "by_tool": map[string]any{}}},
		{name: "bad rate", cfg: map[string]any{"by_user": "30/d"}, problem: "by_user"},
		{name: "bad tool rate", cfg: map[string]any{"by_tool": map[string]any{"x": "a/m"}}, problem: "by_tool.x"},
		{name: "redis without url", cfg: map[string]any{"by_user": "1/s", "backend": "redis"}, problem: "redis_url: required"},
		{name: "unknown backend", cfg: map[string]any{"by_user": "1/s", "backend": "etcd"}, problem: "backend"},
		{name: "bad algorithm", cfg: map[string]any{"by_user": "1/s", "algorithm": "leaky"}, problem: "algorithm"},
		{name: "fail_mode typo", cfg: map[string]any{"by_user": "1/s", "fail_mode": "clsoed"}, warning: "fail_mode"},
		{name: "redis TLS files", cfg: map[string]any{"by_user": "1/s", "backend": "redis", "redis_url": "rediss://r:6380", "redis_ssl_ca_certs": "/ca.pem"}, warning: "redis_ssl_ca_certs: not supported"},
		{name: "nothing limited", cfg: map[string]any{}, warning: ": no by_user"},
		{name: "typo", cfg: map[string]any{"by_user": "1/s", "redis_ur": "x"}, warning: "redis_ur: unknown key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, issues, err := New(tt.cfg)
			if err == nil {
				defer p.Close()
			}
			if tt.problem == "" && err != nil || tt.problem != "" && (err == nil || !strings.Contains(err.Error(), tt.problem)) {
				t.Errorf("err %v, want %q", err, tt.problem)
			}
			var warns []string
			for _, is := range issues {
				if is.Warning {
					warns = append(warns, is.Field+": "+is.Message)
				}
			}
			if tt.warning == "" && len(warns) > 0 || tt.warning != "" && (len(warns) != 1 || !strings.HasPrefix(warns[0], tt.warning)) {
				t.Errorf("warnings %q, want %q", warns, tt.warning)
			}
		})
	}
}

// TestRedis: every algorithm against a real redis-server; two limiters
// (two sidecars) share one budget.
func TestRedis(t *testing.T) {
	srv := redistest.Start(t)
	for _, alg := range []Algorithm{FixedWindow, SlidingWindow, TokenBucket} {
		t.Run(string(alg), func(t *testing.T) {
			cfg := map[string]any{"backend": "redis", "redis_url": "redis://" + srv.Addr() + "/0", "redis_key_prefix": "rl-" + string(alg),
				"algorithm": string(alg), "by_user": "5/m", "by_tenant": "100/m"}
			a, _, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			b, _, _ := New(cfg)
			defer b.Close()
			allowed := 0
			for i := range 8 {
				p := a
				if i%2 == 1 {
					p = b
				}
				if call(t, p.(*Plugin), "t", "alice", "acme") == "" {
					allowed++
				}
			}
			if allowed != 5 {
				t.Errorf("%d of 8 calls allowed through two limiters, want 5", allowed)
			}
			if got := call(t, b.(*Plugin), "t", "bob", "acme"); got != "" {
				t.Errorf("another user: %q", got)
			}
		})
	}
}

func TestFailMode(t *testing.T) {
	srv := redistest.Start(t)
	url := "redis://" + srv.Addr() + "/0"
	srv.Kill()
	for _, tt := range []struct{ mode, want string }{{"open", ""}, {"closed", "BACKEND_UNAVAILABLE/<nil>"}} {
		p, _, err := New(map[string]any{"backend": "redis", "redis_url": url, "by_user": "1/m", "fail_mode": tt.mode})
		if err != nil {
			t.Fatal(err)
		}
		if got := call(t, p.(*Plugin), "t", "a", ""); got != tt.want {
			t.Errorf("fail_mode %s: got %q, want %q", tt.mode, got, tt.want)
		}
		p.Close()
	}
}

func TestBadRedisURL(t *testing.T) {
	_, issues, err := New(map[string]any{"backend": "redis", "redis_url": "http://x:1", "by_user": "1/s"})
	if err == nil || len(issues) != 1 || issues[0].Field != "redis_url" || !strings.HasPrefix(issues[0].Message, "not a Redis URL") {
		t.Errorf("err %v, issues %+v", err, issues)
	}
}
