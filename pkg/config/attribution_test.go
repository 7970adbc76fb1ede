package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestAttributionDefaults: memory by default; the redis section gets its
// defaults; the names of the issue load as written.
func TestAttributionDefaults(t *testing.T) {
	c, err := Parse([]byte("plugins: []\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if a := c.Extproc.Attribution; a.Store != StoreMemory || a.Redis != nil {
		t.Errorf("default attribution %+v", a)
	}
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err = Parse([]byte(`plugins: []
extproc:
  attribution:
    store: Redis
    request_ttl: 30
    max_requests_per_session: 64
    redis: {addresses: ["valkey:6379"], username: mcp, password_file: `+pw+`, op_timeout: 0.02}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	a := c.Extproc.Attribution
	if a.Store != StoreRedis || a.RequestTTL.Duration != 30*time.Second || a.MaxRequestsPerSession != 64 {
		t.Errorf("attribution %+v", a)
	}
	r := a.Redis
	if r.KeyPrefix != DefaultRedisKeyPrefix || r.DialTimeout.Duration != DefaultRedisDialTimeout || r.OpTimeout.Duration != 20*time.Millisecond || r.Username != "mcp" {
		t.Errorf("redis %+v", r)
	}
	for _, w := range c.Warnings {
		if w.Field != "plugins" {
			t.Errorf("warning: %v", w)
		}
	}
}

// TestAttributionProblems: every mistake is reported at its field.
func TestAttributionProblems(t *testing.T) {
	dir := t.TempDir()
	const pre = "plugins: []\nextproc:\n  attribution:\n"
	tests := []struct {
		name, yaml string
		want       []where
	}{
		{"unknown store", "    store: etcd\n", []where{{"", "extproc.attribution.store"}}},
		{"redis without section", "    store: redis\n", []where{{"", "extproc.attribution.redis"}}},
		{"no address", "    store: redis\n    redis: {addresses: []}\n", []where{{"", "extproc.attribution.redis.addresses"}}},
		{"bad address", "    store: redis\n    redis: {addresses: ['valkey', ':6379']}\n",
			[]where{{"", "extproc.attribution.redis.addresses[0]"}, {"", "extproc.attribution.redis.addresses[1]"}}},
		{"password file missing", "    store: redis\n    redis: {addresses: ['r:6379'], password_file: " + dir + "/none}\n", []where{{"", "extproc.attribution.redis.password_file"}}},
		{"username without password", "    store: redis\n    redis: {addresses: ['r:6379'], username: u}\n", []where{{"", "extproc.attribution.redis.username"}}},
		{"tls key without cert", "    store: redis\n    redis: {addresses: ['r:6379'], tls: {keyfile: " + dir + "}}\n",
			[]where{{"", "extproc.attribution.redis.tls.keyfile"}, {"", "extproc.attribution.redis.tls.keyfile"}}},
		{"op_timeout zero", "    store: redis\n    redis: {addresses: ['r:6379'], op_timeout: 0}\n", []where{{"", "extproc.attribution.redis.op_timeout"}}},
		{"op_timeout too long", "    store: redis\n    redis: {addresses: ['r:6379'], op_timeout: 5}\n", []where{{"", "extproc.attribution.redis.op_timeout"}}},
		{"dial_timeout zero", "    store: redis\n    redis: {addresses: ['r:6379'], dial_timeout: 0}\n", []where{{"", "extproc.attribution.redis.dial_timeout"}}},
		{"prefix with spaces", "    store: redis\n    redis: {addresses: ['r:6379'], key_prefix: ' x'}\n", []where{{"", "extproc.attribution.redis.key_prefix"}}},
		{"ttl zero", "    request_ttl: 0\n", []where{{"", "extproc.attribution.request_ttl"}}},
		{"negative cap", "    max_tasks_per_session: -1\n", []where{{"", "extproc.attribution.max_tasks_per_session"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(pre+tt.yaml), nil)
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("err = %v, want a *ValidationError", err)
			}
			if diff := cmp.Diff(tt.want, problemWheres(ve.Problems)); diff != "" {
				t.Errorf("problems (-want +got):\n%s\n%v", diff, err)
			}
		})
	}
	c, err := Parse([]byte(pre+"    redis: {addresses: ['r:6379']}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := wheres(c.Warnings)[where{"", "extproc.attribution.redis"}]; !ok {
		t.Errorf("a redis section with store memory is not warned about: %v", c.Warnings)
	}
}
