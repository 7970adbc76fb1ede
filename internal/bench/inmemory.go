package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
	"github.com/mcp-extproc/mcp-extproc/pkg/identity"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient"
	"github.com/mcp-extproc/mcp-extproc/pkg/processor"
	"github.com/mcp-extproc/mcp-extproc/pkg/rules"
)

// Processor is the sidecar's request path without its servers: plugin pool,
// executor and processor.Server wired as internal/sidecar wires them, minus
// the metrics observers. Serve it with [Pipe] (in memory) or [Serve] (gRPC).
type Processor struct {
	*processor.Server
	pool *pluginclient.Pool
	exec *executor.Executor
	stop context.CancelFunc
}

// NewProcessor builds the Processor for the cpex YAML configYAML. With
// connect, it starts the plugin pool and waits until every plugin is
// connected; without, the pool is never started, which is enough for
// traffic no plugin is called on (the executor only reads the configs).
func NewProcessor(ctx context.Context, configYAML string, connect bool) (*Processor, error) {
	cfg, err := config.Parse([]byte(configYAML), nil)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	log := Logger()
	pool, err := pluginclient.NewPool(cfg.Plugins, cfg.PluginSettings, pluginclient.Options{
		Logger:              log,
		HealthCheckInterval: cfg.PluginSettings.HealthCheckInterval(),
		PluginTimeout:       cfg.PluginSettings.Timeout(),
	})
	if err != nil {
		return nil, fmt.Errorf("plugin pool: %w", err)
	}
	p := &Processor{pool: pool, stop: func() {}}
	if connect {
		pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		p.stop = cancel
		pool.Start(pctx)
		if err := waitPlugins(ctx, pool, cfg); err != nil {
			return nil, errors.Join(err, p.Close())
		}
	}
	p.exec = executor.New(pool, executor.Options{
		Settings:    cfg.PluginSettings,
		HookTimeout: cfg.HookTimeout(),
		Logger:      log,
		IsDown:      func(err error) bool { return errors.Is(err, pluginclient.ErrPluginDown) },
	})
	ident, err := identity.New(cfg.Extproc.Identity)
	if err != nil {
		return nil, errors.Join(err, p.Close())
	}
	ruleSet, issues := rules.Compile(cfg.Extproc.Rules, rules.Options{})
	if len(issues) > 0 {
		return nil, errors.Join(fmt.Errorf("rules: %v", issues), p.Close())
	}
	snap := &processor.Snapshot{Settings: &cfg.Extproc, Hooks: p.exec, Identity: ident, Rules: ruleSet}
	p.Server = processor.New(processor.Options{Logger: log, Snapshot: func() *processor.Snapshot { return snap }})
	return p, nil
}

func waitPlugins(ctx context.Context, pool *pluginclient.Pool, cfg *config.Config) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, pl := range cfg.Plugins {
		for pool.State(pl.Name) != pluginclient.Ready {
			select {
			case <-ctx.Done():
				return fmt.Errorf("plugin %s not ready: %w", pl.Name, ctx.Err())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return nil
}

// Close closes the executor and the pool.
func (p *Processor) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var errs []error
	if p.exec != nil {
		errs = append(errs, p.exec.Close(ctx))
	}
	errs = append(errs, p.pool.Close(ctx))
	p.stop()
	return errors.Join(errs...)
}
