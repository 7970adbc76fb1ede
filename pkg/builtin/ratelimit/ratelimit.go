// Package ratelimit is the built-in rate limiter: cpex-plugins'
// rate_limiter (cpex_rate_limiter.RateLimiterPlugin, formerly ContextForge's
// plugins.rate_limiter.rate_limiter.RateLimiterPlugin). Tool calls and
// prompt fetches are counted per user, per tenant and per tool, in the
// sidecar's memory or in Redis (or Valkey), which replicas then share; a
// request over any limit is refused with HTTP 429 and Retry-After.
package ratelimit

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mcp-extproc/mcp-extproc/pkg/builtin/jsonscan"
	"github.com/mcp-extproc/mcp-extproc/pkg/builtin/plugin"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// Spec describes the plugin.
func Spec() plugin.Spec {
	return plugin.Spec{
		Name: "rate_limiter",
		Kinds: []string{
			"plugins.rate_limiter.rate_limiter.RateLimiterPlugin",
			"cpex_rate_limiter.RateLimiterPlugin",
			"cpex_rate_limiter.rate_limiter.RateLimiterPlugin",
		},
		Hooks: []cpex.HookType{cpex.PromptPreFetch, cpex.ToolPreInvoke},
		Keys:  keys,
		New:   New,
	}
}

var keys = []plugin.Key{
	{Name: "by_user", Supported: true, Note: `limit per user, e.g. "60/m" (s, m, h; at most 1000000)`},
	{Name: "by_tenant", Supported: true, Note: "limit per tenant"},
	{Name: "by_tool", Supported: true, Note: "limits per tool (or prompt) name"},
	{Name: "algorithm", Supported: true, Note: "fixed_window (default), sliding_window or token_bucket"},
	{Name: "backend", Supported: true, Note: "memory (default: one sidecar) or redis (shared)"},
	{Name: "redis_url", Supported: true, Note: "redis:// or rediss:// URL, required with backend redis"},
	{Name: "redis_key_prefix", Supported: true, Note: `key prefix (default "rl")`},
	{Name: "fail_mode", Supported: true, Note: "open (default): a backend failure lets the request through; closed: 503 BACKEND_UNAVAILABLE"},
	{Name: "redis_ssl_ca_certs", Supported: false, Note: "rediss:// uses the system's trust store"},
	{Name: "redis_ssl_certfile", Supported: false, Note: "no client certificate to Redis"},
	{Name: "redis_ssl_keyfile", Supported: false, Note: "no client certificate to Redis"},
	{Name: "redis_ssl_check_hostname", Supported: false, Note: "certificates are always verified"},
}

type config struct {
	ByUser     string            `json:"by_user"`
	ByTenant   string            `json:"by_tenant"`
	ByTool     map[string]string `json:"by_tool"`
	Algorithm  Algorithm         `json:"algorithm"`
	Backend    string            `json:"backend"`
	RedisURL   string            `json:"redis_url"`
	RedisKeyPx *string           `json:"redis_key_prefix"`
	FailMode   string            `json:"fail_mode"`
}

// maxCount is cpex-plugins' sanity ceiling on a rate's count.
const maxCount = 1_000_000

// ParseRate reads "<count>/<unit>", unit s, sec, second, m, min, minute,
// h, hr or hour.
func ParseRate(s string) (Rate, error) {
	count, unit, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return Rate{}, fmt.Errorf("%q: want <count>/<unit>, e.g. 60/m", s)
	}
	n, err := strconv.Atoi(strings.TrimSpace(count))
	if err != nil || n <= 0 || n > maxCount {
		return Rate{}, fmt.Errorf("%q: the count must be between 1 and %d", s, maxCount)
	}
	var w time.Duration
	switch strings.ToLower(strings.TrimSpace(unit)) {
	case "s", "sec", "second":
		w = time.Second
	case "m", "min", "minute":
		w = time.Minute
	case "h", "hr", "hour":
		w = time.Hour
	default:
		return Rate{}, fmt.Errorf("%q: the unit must be s, m or h", s)
	}
	return Rate{Count: n, Window: w}, nil
}

// Plugin is a configured rate limiter.
type Plugin struct {
	user, tenant *Rate
	tools        map[string]Rate
	algorithm    Algorithm
	backend      string
	prefix       string
	failClosed   bool
	store        Store
	now          func() time.Time
	decs         jsonscan.Decoders
}

// New builds the limiter from its config: block. With backend redis the
// client is made but does not connect until the first request.
func New(cfg map[string]any) (plugin.Plugin, []plugin.Issue, error) {
	return newWith(cfg, time.Now)
}

func newWith(cfg map[string]any, now func() time.Time) (*Plugin, []plugin.Issue, error) {
	var c config
	issues := plugin.Decode(cfg, &c, keys)
	p := &Plugin{algorithm: FixedWindow, backend: "memory", prefix: "rl", now: now, tools: map[string]Rate{}}
	rate := func(key, s string) *Rate {
		if s == "" {
			return nil
		}
		r, err := ParseRate(s)
		if err != nil {
			issues = append(issues, plugin.Problem(key, err.Error()))
			return nil
		}
		return &r
	}
	p.user, p.tenant = rate("by_user", c.ByUser), rate("by_tenant", c.ByTenant)
	tools := make([]string, 0, len(c.ByTool))
	for t := range c.ByTool {
		tools = append(tools, t)
	}
	sort.Strings(tools)
	for _, t := range tools {
		if r := rate("by_tool."+t, c.ByTool[t]); r != nil {
			p.tools[t] = *r
		}
	}
	if c.Algorithm != "" {
		if !slices.Contains([]Algorithm{FixedWindow, SlidingWindow, TokenBucket}, c.Algorithm) {
			issues = append(issues, plugin.Problem("algorithm", fmt.Sprintf("%q: want fixed_window, sliding_window or token_bucket", c.Algorithm)))
		}
		p.algorithm = c.Algorithm
	}
	switch c.FailMode {
	case "", "open":
	case "closed":
		p.failClosed = true
	default:
		// cpex-plugins falls back to open with a warning.
		issues = append(issues, plugin.Warning("fail_mode", fmt.Sprintf("%q: want open or closed; open applies", c.FailMode)))
	}
	if c.RedisKeyPx != nil {
		p.prefix = *c.RedisKeyPx
	}
	if c.Backend != "" {
		p.backend = c.Backend
	}
	switch p.backend {
	case "memory":
		if c.RedisURL != "" {
			issues = append(issues, plugin.Warning("redis_url", "ignored with backend memory"))
		}
	case "redis":
		if c.RedisURL == "" {
			issues = append(issues, plugin.Problem("redis_url", "required with backend redis"))
		}
	default:
		issues = append(issues, plugin.Problem("backend", fmt.Sprintf("%q: want memory or redis", c.Backend)))
	}
	if p.user == nil && p.tenant == nil && len(p.tools) == 0 && plugin.Err(issues) == nil {
		issues = append(issues, plugin.Warning("", "no by_user, by_tenant or by_tool: nothing is limited"))
	}
	if err := plugin.Err(issues); err != nil {
		return nil, issues, err
	}
	if p.backend == "redis" {
		s, err := newRedis(c.RedisURL)
		if err != nil {
			issues = append(issues, plugin.Problem("redis_url", err.Error()))
			return nil, issues, plugin.Err(issues)
		}
		p.store = s
	} else {
		p.store = newMemory(now)
	}
	return p, issues, nil
}

// dimension is one counter a request is checked against.
type dimension struct {
	name string // user, tenant, tool
	key  string
	rate Rate
}

// Invoke implements plugin.Plugin.
func (p *Plugin) Invoke(ctx context.Context, hook cpex.HookType, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.PluginResult, error) {
	var target string
	switch hook {
	case cpex.ToolPreInvoke:
		target = "name"
	case cpex.PromptPreFetch:
		target = "prompt_id"
	default:
		return nil, nil
	}
	var g cpex.GlobalContext
	if pctx != nil {
		g = pctx.GlobalContext
	}
	tenant := strings.TrimSpace(g.TenantID)
	scope := p.prefix + ":"
	if tenant != "" {
		scope += tenant + ":"
	}
	var dims []dimension
	if p.user != nil {
		dims = append(dims, dimension{"user", scope + "user:" + userOf(g) + ":" + seconds(p.user.Window), *p.user})
	}
	if p.tenant != nil && tenant != "" {
		dims = append(dims, dimension{"tenant", scope + "tenant:" + tenant + ":" + seconds(p.tenant.Window), *p.tenant})
	}
	if len(p.tools) > 0 {
		name, _, err := p.decs.Member(payload, target)
		if err != nil {
			return nil, fmt.Errorf("rate_limiter: %w", err)
		}
		if r, ok := p.tools[name]; ok {
			dims = append(dims, dimension{"tool", scope + "tool:" + name + ":" + seconds(r.Window), r})
		}
	}
	var worst *dimension
	var worstD Decision
	for i := range dims {
		d, err := p.store.Hit(ctx, p.algorithm, dims[i].key, dims[i].rate)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if p.failClosed {
				status := 503
				return plugin.Block(&cpex.PluginViolation{
					Reason: "Rate limiter backend unavailable", Description: "Rate limiter backend unavailable; failing closed per fail_mode=closed",
					Code: "BACKEND_UNAVAILABLE", Details: map[string]any{}, HTTPStatusCode: &status,
					HTTPHeaders: map[string]string{"Retry-After": "1"},
				}), nil
			}
			// fail_mode open: the request goes on; the error is in the
			// result's metadata for the logs.
			return &cpex.PluginResult{Metadata: map[string]any{"rate_limiter_error": err.Error()}}, nil
		}
		// The most restrictive dimension is reported: a refusing one, else
		// the one with the fewest requests left.
		if worst == nil || (!d.Allowed && worstD.Allowed) || (d.Allowed == worstD.Allowed && d.Remaining < worstD.Remaining) {
			worst, worstD = &dims[i], d
		}
	}
	if worst == nil || worstD.Allowed {
		return nil, nil
	}
	reset := max(worstD.ResetIn, 0)
	retry := int((reset + time.Second - 1) / time.Second)
	status := 429
	return plugin.Block(&cpex.PluginViolation{
		Reason: "Rate limit exceeded", Description: "Rate limit exceeded", Code: "RATE_LIMIT",
		Details: map[string]any{"limited": true, "dimension": worst.name, "limit": worst.rate.Count,
			"remaining": worstD.Remaining, "reset_in": retry},
		HTTPStatusCode: &status,
		HTTPHeaders: map[string]string{
			"X-RateLimit-Limit":     strconv.Itoa(worst.rate.Count),
			"X-RateLimit-Remaining": strconv.Itoa(worstD.Remaining),
			"X-RateLimit-Reset":     strconv.FormatInt(p.now().Add(reset).Unix(), 10),
			"Retry-After":           strconv.Itoa(retry),
		},
	}), nil
}

func seconds(d time.Duration) string { return strconv.Itoa(int(d / time.Second)) }

// userOf is the caller's identity as cpex-plugins reads it: the user string,
// or the email, id or sub of a user object; "anonymous" without one.
func userOf(g cpex.GlobalContext) string {
	if len(g.User) > 0 {
		var s string
		if json.Unmarshal(g.User, &s) == nil {
			if s = strings.TrimSpace(s); s != "" {
				return s
			}
		} else {
			var obj map[string]any
			if json.Unmarshal(g.User, &obj) == nil {
				for _, k := range []string{"email", "id", "sub"} {
					if v, ok := obj[k]; ok && v != nil {
						if s := strings.TrimSpace(fmt.Sprint(v)); s != "" {
							return s
						}
					}
				}
			}
		}
	}
	if u := g.UserContext; u != nil {
		if u.Email != "" {
			return u.Email
		}
		if u.UserID != "" {
			return u.UserID
		}
	}
	return "anonymous"
}

// Close implements plugin.Plugin: it closes the Redis client.
func (p *Plugin) Close() error { return p.store.Close() }

// NonBlocking implements plugin.NonBlocking: with the memory backend
// Invoke only computes (under a short lock); on Redis it waits on the
// network.
func (p *Plugin) NonBlocking() bool { return p.backend == "memory" }
