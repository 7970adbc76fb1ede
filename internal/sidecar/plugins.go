package sidecar

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/rs/zerolog"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
	"github.com/mcp-extproc/mcp-extproc/pkg/metrics"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient"
)

// pluginSet is the set of plugin clients of one configuration: one
// pluginclient.Client per plugin, looked up through a pluginclient.Pool
// (which satisfies executor.Plugins: Invoke by name, Effective). A set is
// immutable; a reload builds a new one that shares the clients of the
// plugins whose config did not change, so their sessions live on. The
// sidecar, not the pool, starts and closes the clients.
type pluginSet struct {
	*pluginclient.Pool
	clients  []*pluginclient.Client   // in config order, as in the pool
	local    map[string]config.Plugin // the local config each client was built from
	settings config.PluginSettings
	sessions int // extproc.plugin_sessions the clients were built with
	// nonBlocking: the built-ins that cannot block, by name; nil for
	// every other plugin (builtin.go).
	nonBlocking map[string]executor.LocalPlugin
}

// buildPluginSet makes the set for cfg, reusing the clients of prev whose
// plugin config and plugin settings are unchanged. It returns the clients
// it created (to Start) and the clients of prev no longer used (to Close).
func buildPluginSet(cfg *config.Config, prev *pluginSet, log zerolog.Logger, m *metrics.Metrics) (set *pluginSet, created, removed []*pluginclient.Client, err error) {
	set = &pluginSet{clients: make([]*pluginclient.Client, 0, len(cfg.Plugins)), local: map[string]config.Plugin{},
		settings: cfg.PluginSettings, sessions: cfg.Extproc.PluginSessions, nonBlocking: map[string]executor.LocalPlugin{}}
	for _, p := range cfg.Plugins {
		c, reused := prev.reusable(p, set)
		if reused {
			set.nonBlocking[p.Name] = prev.nonBlocking[p.Name]
		} else {
			opts := pluginclient.Options{Logger: log, Observer: m, Slots: set.sessions}
			var local executor.LocalPlugin
			if local, err = inProcess(p, &opts); err == nil { // builtin.go
				c, err = pluginclient.New(p, cfg.PluginSettings, opts)
			}
			if err != nil {
				closeClients(context.Background(), created)
				return nil, nil, nil, err
			}
			set.nonBlocking[p.Name] = local
			created = append(created, c)
		}
		set.clients, set.local[p.Name] = append(set.clients, c), p
	}
	if set.Pool, err = pluginclient.PoolOf(set.clients...); err != nil {
		closeClients(context.Background(), created)
		return nil, nil, nil, err
	}
	if prev != nil {
		for _, old := range prev.clients {
			if c, _ := set.Client(old.Name()); c != old {
				removed = append(removed, old)
			}
		}
	}
	return set, created, removed, nil
}

// reusable returns s's client for p if p, the plugin settings and the
// session count of next are unchanged. A nil set has none.
func (s *pluginSet) reusable(p config.Plugin, next *pluginSet) (*pluginclient.Client, bool) {
	if s == nil {
		return nil, false
	}
	c, ok := s.Client(p.Name)
	if !ok || !reflect.DeepEqual(s.local[p.Name], p) || !reflect.DeepEqual(s.settings, next.settings) || s.sessions != next.sessions {
		return nil, false
	}
	return c, true
}

// has reports whether the set holds plugin name.
func (s *pluginSet) has(name string) bool {
	_, ok := s.Client(name)
	return ok
}

// startClients starts clients; their background work stops with ctx.
func startClients(ctx context.Context, clients []*pluginclient.Client) {
	for _, c := range clients {
		c.Start(ctx)
	}
}

// closeClients closes clients concurrently, bounded by ctx.
func closeClients(ctx context.Context, clients []*pluginclient.Client) error {
	errs := make([]error, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			if err := c.Close(ctx); err != nil {
				errs[i] = fmt.Errorf("plugin %s: %w", c.Name(), err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
