package config

import (
	"fmt"
	"net"
	"strings"
	"time"
)

// Attribution is extproc.attribution: where the sidecar remembers what each
// forwarded request and created task was, so that results arriving on
// other streams (a GET replay, tasks/result, tasks/get) get their post
// hooks (docs/attribution-store.md).
type Attribution struct {
	// Store is "memory" (default: in the sidecar's process) or "redis"
	// (shared by the replicas of a gateway through Redis or Valkey).
	Store string `yaml:"store,omitempty" json:"store,omitempty" default:"memory"`
	// Redis configures store: redis; required with it.
	Redis *Redis `yaml:"redis,omitempty" json:"redis,omitempty" default:"none; required with store redis"`
	// RequestTTL and TaskTTL are how long a request entry (default 600 s)
	// and a task entry (default 3600 s) are kept, in either store.
	RequestTTL *Seconds `yaml:"request_ttl,omitempty" json:"request_ttl,omitempty" default:"600"`
	TaskTTL    *Seconds `yaml:"task_ttl,omitempty" json:"task_ttl,omitempty" default:"3600"`
	// MaxRequestsPerSession and MaxTasksPerSession cap the entries of one
	// MCP session (defaults 1024 and 256); the oldest leave first.
	MaxRequestsPerSession int `yaml:"max_requests_per_session,omitempty" json:"max_requests_per_session,omitempty" default:"0: 1024"`
	MaxTasksPerSession    int `yaml:"max_tasks_per_session,omitempty" json:"max_tasks_per_session,omitempty" default:"0: 256"`
}

// Redis is extproc.attribution.redis: the Redis or Valkey server (one
// address) or cluster (several) shared by the replicas.
type Redis struct {
	Addresses []string `yaml:"addresses" json:"addresses" default:"required"` // host:port
	Username  string   `yaml:"username,omitempty" json:"username,omitempty" default:"none"`
	// PasswordFile holds the password (trailing newline ignored); the
	// password itself never appears in the config.
	PasswordFile string `yaml:"password_file,omitempty" json:"password_file,omitempty" default:"none: no password"`
	// TLS: certfile, keyfile, keyfile_password, ca_bundle, verify,
	// check_hostname, as for a plugin (package tlsconfig builds both).
	TLS *TLS `yaml:"tls,omitempty" json:"tls,omitempty" default:"none: plaintext"`
	// KeyPrefix starts every key (default "mcp-extproc:").
	KeyPrefix string `yaml:"key_prefix,omitempty" json:"key_prefix,omitempty" default:"mcp-extproc:"`
	// DialTimeout bounds a new connection (default 0.2 s); OpTimeout bounds
	// every lookup, every batch of writes and the wait of a task record
	// (default 0.05 s).
	DialTimeout *Seconds `yaml:"dial_timeout,omitempty" json:"dial_timeout,omitempty" default:"0.2"`
	OpTimeout   *Seconds `yaml:"op_timeout,omitempty" json:"op_timeout,omitempty" default:"0.05"`
}

// Values of Attribution.Store, and the defaults of the redis section.
const (
	StoreMemory               = "memory"
	StoreRedis                = "redis"
	DefaultRedisKeyPrefix     = "mcp-extproc:"
	DefaultRedisDialTimeout   = 200 * time.Millisecond
	DefaultRedisOpTimeout     = 50 * time.Millisecond
	maxRedisOpTimeout         = time.Second
	maxAttributionSessionCaps = 1 << 20
)

// choices lists the section's one-of-a-few-words settings.
func (a *Attribution) choices(at string) []choice {
	return []choice{{joinPath(at, "store"), &a.Store, []string{StoreMemory, StoreRedis}}}
}

// setDefaults sets the store (memory) and the redis section's defaults.
func (a *Attribution) setDefaults(*Config) {
	for _, ch := range a.choices("") {
		ch.setDefault()
	}
	r := a.Redis
	if r == nil {
		return
	}
	if r.KeyPrefix == "" {
		r.KeyPrefix = DefaultRedisKeyPrefix
	}
	if r.DialTimeout == nil {
		r.DialTimeout = NewSeconds(DefaultRedisDialTimeout)
	}
	if r.OpTimeout == nil {
		r.OpTimeout = NewSeconds(DefaultRedisOpTimeout)
	}
}

// check checks extproc.attribution (after defaults).
func (a *Attribution) check(v *validator, _ *Config, base string) {
	v.choices(a.choices(base)...)
	for _, f := range []struct {
		name string
		d    *Seconds
	}{{"request_ttl", a.RequestTTL}, {"task_ttl", a.TaskTTL}} {
		if f.d != nil && f.d.Duration <= 0 {
			v.problem("", base+"."+f.name, "must be positive")
		}
	}
	for _, f := range []struct {
		name string
		n    int
	}{{"max_requests_per_session", a.MaxRequestsPerSession}, {"max_tasks_per_session", a.MaxTasksPerSession}} {
		if f.n < 0 || f.n > maxAttributionSessionCaps {
			v.problem("", base+"."+f.name, "must be between 0 (default) and %d, got %d", maxAttributionSessionCaps, f.n)
		}
	}
	switch {
	case a.Store == StoreRedis && a.Redis == nil:
		v.problem("", base+".redis", `required with store: redis, e.g. redis: {addresses: ["valkey:6379"]}`)
	case a.Store == StoreRedis:
		v.redis(a.Redis, base+".redis")
	case a.Redis != nil:
		v.warn("", base+".redis", "ignored: store is %q (set store: redis to share attribution between replicas)", a.Store)
	}
}

// redis checks extproc.attribution.redis.
func (v *validator) redis(r *Redis, base string) {
	if len(r.Addresses) == 0 {
		v.problem("", base+".addresses", `required: at least one host:port, e.g. ["valkey:6379"]`)
	}
	for i, a := range r.Addresses {
		if host, port, err := net.SplitHostPort(a); err != nil || host == "" || port == "" {
			v.problem("", fmt.Sprintf("%s.addresses[%d]", base, i), "must be host:port, got %q", a)
		}
	}
	v.file("", base+".password_file", r.PasswordFile)
	if r.Username != "" && r.PasswordFile == "" {
		v.problem("", base+".username", "requires password_file")
	}
	if t := r.TLS; t != nil {
		v.file("", base+".tls.certfile", t.CertFile)
		v.file("", base+".tls.keyfile", t.KeyFile)
		v.file("", base+".tls.ca_bundle", t.CABundle)
		if t.KeyFile != "" && t.CertFile == "" {
			v.problem("", base+".tls.keyfile", "requires certfile")
		}
		if !t.VerifyEnabled() {
			v.warn("", base+".tls.verify", "false: the Redis server's certificate is not verified")
		}
		if t.KeyFile == "" && t.CertFile != "" {
			v.problem("", base+".tls.certfile", "requires keyfile")
		}
	}
	if strings.TrimSpace(r.KeyPrefix) != r.KeyPrefix {
		v.problem("", base+".key_prefix", "must not start or end with spaces, got %q", r.KeyPrefix)
	}
	if r.DialTimeout != nil && r.DialTimeout.Duration <= 0 {
		v.problem("", base+".dial_timeout", "must be positive")
	}
	if d := r.OpTimeout; d != nil && (d.Duration <= 0 || d.Duration > maxRedisOpTimeout) {
		v.problem("", base+".op_timeout", "must be positive and at most %v (a request may wait this long on the store), got %v", maxRedisOpTimeout, d.Duration)
	}
}
