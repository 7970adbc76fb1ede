package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/rs/zerolog"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/metrics"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient"
)

// pluginSet is the set of plugins of one configuration generation: one
// pluginclient.Pool per plugin, so that a reload can keep the sessions of the
// plugins that did not change. A pluginSet is immutable; a reload builds a
// new one that shares the unchanged pools. It satisfies executor.Plugins.
type pluginSet struct {
	epoch    uint64 // increases with every reload
	order    []string
	pools    map[string]*pluginclient.Pool
	local    map[string]config.Plugin // the local config each pool was built from
	settings config.PluginSettings
}

// buildPluginSet makes the set for cfg, reusing pools of prev whose plugin
// config and plugin settings are unchanged. It returns the pools it created
// (to Start) and the pools of prev that are no longer used (to Close).
func buildPluginSet(cfg *config.Config, prev *pluginSet, log zerolog.Logger, m *metrics.Metrics) (set *pluginSet, created, removed []*pluginclient.Pool, err error) {
	set = &pluginSet{pools: map[string]*pluginclient.Pool{}, local: map[string]config.Plugin{}, settings: cfg.PluginSettings}
	if prev != nil {
		set.epoch = prev.epoch + 1
	}
	for _, p := range cfg.Plugins {
		set.order = append(set.order, p.Name)
		set.local[p.Name] = p
		if prev != nil {
			if old, ok := prev.pools[p.Name]; ok && reflect.DeepEqual(prev.local[p.Name], p) && reflect.DeepEqual(prev.settings, cfg.PluginSettings) {
				set.pools[p.Name] = old
				continue
			}
		}
		pool, err := pluginclient.NewPool([]config.Plugin{p}, cfg.PluginSettings, pluginclient.Options{
			Logger:              log,
			HealthCheckInterval: cfg.PluginSettings.HealthCheckInterval(),
			PluginTimeout:       cfg.PluginSettings.Timeout(),
			Observer:            m,
		})
		if err != nil {
			for _, c := range created {
				c.Close(context.Background())
			}
			return nil, nil, nil, fmt.Errorf("plugin %s: %w", p.Name, err)
		}
		set.pools[p.Name] = pool
		created = append(created, pool)
	}
	if prev != nil {
		for name, old := range prev.pools {
			if set.pools[name] != old {
				removed = append(removed, old)
			}
		}
	}
	return set, created, removed, nil
}

// Invoke implements executor.Plugins.
func (s *pluginSet) Invoke(ctx context.Context, plugin string, hook cpex.HookType, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	pool, ok := s.pools[plugin]
	if !ok {
		return nil, fmt.Errorf("plugin %s: %w", plugin, pluginclient.ErrUnknownPlugin)
	}
	return pool.Invoke(ctx, plugin, hook, payload, pctx)
}

// Effective implements executor.Plugins: the merged configs in config order.
// The generation combines the reload epoch with the pools' generations, so
// it increases whenever any merged config changes.
func (s *pluginSet) Effective() (uint64, []config.Plugin) {
	gen := s.epoch << 40
	out := make([]config.Plugin, 0, len(s.order))
	for _, name := range s.order {
		g, ps := s.pools[name].Effective()
		gen += g
		out = append(out, ps...)
	}
	return gen, out
}

// Generation is the generation Effective reports, without copying configs.
func (s *pluginSet) Generation() uint64 {
	gen := s.epoch << 40
	for _, name := range s.order {
		gen += s.pools[name].Generation()
	}
	return gen
}

// State returns a plugin's connection state.
func (s *pluginSet) State(plugin string) pluginclient.State {
	if pool, ok := s.pools[plugin]; ok {
		return pool.State(plugin)
	}
	return pluginclient.Down
}

// closePools closes pools, bounded by ctx.
func closePools(ctx context.Context, pools []*pluginclient.Pool) error {
	var errs []error
	for _, p := range pools {
		errs = append(errs, p.Close(ctx))
	}
	return errors.Join(errs...)
}

// allPools returns every pool of the set.
func (s *pluginSet) allPools() []*pluginclient.Pool {
	out := make([]*pluginclient.Pool, 0, len(s.pools))
	for _, p := range s.pools {
		out = append(out, p)
	}
	return out
}
