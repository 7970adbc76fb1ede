package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

func TestEveryKindIsKnown(t *testing.T) {
	seen := map[string]string{}
	for _, s := range Specs() {
		if len(s.Kinds) == 0 || len(s.Hooks) == 0 || len(s.Keys) == 0 || s.New == nil {
			t.Errorf("%s: incomplete spec", s.Name)
		}
		for _, k := range s.Kinds {
			if other, dup := seen[k]; dup {
				t.Errorf("kind %s is both %s and %s", k, other, s.Name)
			}
			seen[k] = s.Name
			if got, ok := Lookup(k); !ok || got.Name != s.Name {
				t.Errorf("Lookup(%s) = %s, %v", k, got.Name, ok)
			}
		}
	}
	if Known("external") || Known("plugins.summarizer.summarizer.SummarizerPlugin") {
		t.Error("Known accepts a kind that is not built in")
	}
}

func TestConn(t *testing.T) {
	c, err := Open("Deny", "plugins.deny_filter.deny.DenyListPlugin", map[string]any{"words": []any{"bad"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	raw, found, err := c.PluginConfig(ctx, "deny")
	if err != nil || !found || string(raw) != `{"name":"Deny"}` {
		t.Errorf("PluginConfig(deny) = %s, %v, %v", raw, found, err)
	}
	if _, found, _ := c.PluginConfig(ctx, "other"); found {
		t.Error("PluginConfig(other) found")
	}
	tests := []struct {
		payload string
		want    string // "continue", "block" or "error"
	}{
		{`{"prompt_id":"p","args":{"a":"fine"}}`, "continue"},
		{`{"prompt_id":"p","args":{"a":"a bad one"}}`, "block"},
		{`{"prompt_id":"p","args":["bad",`, "error"}, // the word makes it parse
	}
	for _, tt := range tests {
		reply, err := c.InvokeHook(ctx, cpex.PromptPreFetch, "Deny", json.RawMessage(tt.payload), nil)
		if err != nil {
			t.Fatalf("%s: %v", tt.payload, err)
		}
		got := "continue"
		switch {
		case reply.Error != nil:
			got = "error"
			if reply.Error.PluginName != "Deny" {
				t.Errorf("error %+v", reply.Error)
			}
		case !reply.Result.Continue():
			got = "block"
			if reply.Result.Violation.PluginName != "Deny" {
				t.Errorf("violation %+v", reply.Result.Violation)
			}
		}
		if got != tt.want || reply.PluginName != "Deny" {
			t.Errorf("%s: got %s (%+v), want %s", tt.payload, got, reply, tt.want)
		}
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	// A done context is the caller's to check: the plugin's answer is
	// kept, and only a failure becomes the context's error.
	if reply, err := c.InvokeHook(done, cpex.PromptPreFetch, "Deny", json.RawMessage(`{"prompt_id":"p"}`), nil); err != nil || !reply.Result.Continue() {
		t.Errorf("a done context, a plugin that continues: %+v, %v", reply, err)
	}
	if _, err := c.InvokeHook(done, cpex.PromptPreFetch, "Deny", json.RawMessage(`{"prompt_id":"p","args":["bad",`), nil); !errors.Is(err, context.Canceled) {
		t.Errorf("a done context, a plugin that fails: %v, want context.Canceled", err)
	}
	if _, err := Open("X", "plugins.deny_filter.deny.DenyListPlugin", map[string]any{}); err == nil || !strings.Contains(err.Error(), "words") {
		t.Errorf("Open with a bad config: %v", err)
	}
}

func TestCheck(t *testing.T) {
	issues := Check("plugins.deny_filter.deny.DenyListPlugin", []cpex.HookType{cpex.ToolPostInvoke}, map[string]any{"words": []any{"a"}, "wrods": 1})
	var got []string
	for _, is := range issues {
		got = append(got, is.Field)
	}
	if strings.Join(got, ",") != "config.wrods,hooks[0]" {
		t.Errorf("issues %+v", issues)
	}
	if is := Check("nope", nil, nil); len(is) != 1 || is[0].Warning {
		t.Errorf("unknown kind: %+v", is)
	}
}

// TestNonBlocking: every built-in plugin is called without a timer (it
// only computes), but a rate limiter on Redis, which waits on the network.
func TestNonBlocking(t *testing.T) {
	configs := map[string]map[string]any{
		"deny_filter":    {"words": []any{"a"}},
		"search_replace": {"words": []any{map[string]any{"search": "a", "replace": "b"}}},
	}
	for _, s := range Specs() {
		c, err := Open(s.Name, s.Kinds[0], configs[s.Name])
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		if !c.NonBlocking() {
			t.Errorf("%s: may block, want not", s.Name)
		}
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	}
	c, err := Open("Limit", "plugins.rate_limiter.rate_limiter.RateLimiterPlugin",
		map[string]any{"by_user": "10/m", "backend": "redis", "redis_url": "redis://127.0.0.1:1/0"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.NonBlocking() {
		t.Error("rate_limiter on Redis: cannot block, want may block")
	}
}
