package sidecar

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-extproc/mcp-extproc/pkg/attribution"
	"github.com/mcp-extproc/mcp-extproc/pkg/attribution/redisstore"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/metrics"
	"github.com/mcp-extproc/mcp-extproc/pkg/tlsconfig"
	"github.com/mcp-extproc/mcp-extproc/pkg/toolpin"
)

// attributionStore is the store the processor keeps for the sidecar's life
// and how to release it.
type attributionStore struct {
	attribution.Store
	// pins are extproc.tool_pinning's pins, in the same backend: the
	// process's memory, or the same Redis.
	pins  toolpin.Store
	close func() error
}

// newAttributionStore builds extproc.attribution of cfg: the in-process
// memory, or the Redis-backed store (which does not wait for Redis: it
// falls back until Redis answers).
func newAttributionStore(cfg *config.Attribution, pinTTL *config.Seconds, m *metrics.Metrics, log zerolog.Logger) (*attributionStore, error) {
	var ttl time.Duration
	if pinTTL != nil {
		ttl = pinTTL.Duration
	}
	bounds := attribution.Options{
		MaxRequestsPerSession: cfg.MaxRequestsPerSession,
		MaxTasksPerSession:    cfg.MaxTasksPerSession,
	}
	if cfg.RequestTTL != nil {
		bounds.RequestTTL = cfg.RequestTTL.Duration
	}
	if cfg.TaskTTL != nil {
		bounds.TaskTTL = cfg.TaskTTL.Duration
	}
	if cfg.Store != config.StoreRedis {
		return &attributionStore{Store: attribution.New(bounds), pins: toolpin.NewMemory(0, ttl, nil), close: func() error { return nil }}, nil
	}
	r := cfg.Redis
	opts := redisstore.Options{
		Addrs: r.Addresses, Username: r.Username, KeyPrefix: r.KeyPrefix,
		DialTimeout: r.DialTimeout.Duration, OpTimeout: r.OpTimeout.Duration,
		Bounds: bounds, Observer: m, Logger: log,
	}
	if r.PasswordFile != "" {
		pw, err := os.ReadFile(r.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("extproc.attribution.redis.password_file: %w", err)
		}
		opts.Password = strings.TrimRight(string(pw), "\r\n")
	}
	if r.TLS != nil {
		tc, err := tlsconfig.Client(r.TLS)
		if err != nil {
			return nil, fmt.Errorf("extproc.attribution.redis.tls: %w", err)
		}
		opts.TLS = tc
	}
	st, err := redisstore.New(opts)
	if err != nil {
		return nil, fmt.Errorf("attribution store: %w", err)
	}
	log.Info().Strs("addresses", r.Addresses).Str("key_prefix", r.KeyPrefix).Msg("attribution shared through redis")
	return &attributionStore{Store: st, pins: toolpin.NewRedis(st.Client(), r.KeyPrefix, ttl), close: st.Close}, nil
}

// attributionChanged reports whether a reload changed extproc.attribution,
// which applies only at start: the store holds what was forwarded before.
func attributionChanged(prev, next *config.Config) bool {
	return !reflect.DeepEqual(prev.Extproc.Attribution, next.Extproc.Attribution)
}

// newPinner is extproc.tool_pinning of one configuration on the sidecar's
// pin store; nil when off. The snapshot file is read now: a reload reads
// it again.
func newPinner(cfg *config.ToolPinning, store toolpin.Store) (*toolpin.Pinner, error) {
	if !cfg.Enabled() {
		return nil, nil
	}
	var snap *toolpin.Snapshot
	if cfg.Mode == config.PinningApproved {
		var err error
		if snap, err = toolpin.LoadSnapshot(cfg.Snapshot); err != nil {
			return nil, fmt.Errorf("extproc.tool_pinning.snapshot: %w", err)
		}
	}
	return toolpin.New(toolpin.Mode(cfg.Mode), toolpin.OnChange(cfg.OnChange), snap, store)
}
