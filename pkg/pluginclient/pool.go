package pluginclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// Pool is a fixed, ordered set of clients looked up by plugin name. It
// satisfies the executor's plugin interface (Invoke by name, Effective). It
// is safe for concurrent use.
type Pool struct {
	clients []*Client
	byName  map[string]*Client
}

// NewPool validates plugins and makes a client for each (see New); the pool
// owns them: Start starts and Close closes them all.
func NewPool(plugins []config.Plugin, settings config.PluginSettings, opts Options) (*Pool, error) {
	clients := make([]*Client, 0, len(plugins))
	for _, pl := range plugins {
		c, err := New(pl, settings, opts)
		if err != nil {
			return nil, err
		}
		clients = append(clients, c)
	}
	return PoolOf(clients...)
}

// PoolOf returns the pool of clients, in that order. Two clients of the same
// name are an error. The clients stay the caller's: a caller that shares
// clients between pools (keeping unchanged plugins across a config reload)
// starts and closes them itself rather than through the pool.
func PoolOf(clients ...*Client) (*Pool, error) {
	p := &Pool{clients: clients, byName: make(map[string]*Client, len(clients))}
	for _, c := range clients {
		if _, dup := p.byName[c.name]; dup {
			return nil, fmt.Errorf("plugin %q: duplicate name", c.name)
		}
		p.byName[c.name] = c
	}
	return p, nil
}

// Client returns the client of plugin.
func (p *Pool) Client(plugin string) (*Client, bool) {
	c, ok := p.byName[plugin]
	return c, ok
}

// Start starts every client (see Client.Start).
func (p *Pool) Start(ctx context.Context) {
	for _, c := range p.clients {
		c.Start(ctx)
	}
}

// Invoke runs hook on plugin (see Client.Invoke); an unknown plugin is an
// error wrapping ErrUnknownPlugin.
func (p *Pool) Invoke(ctx context.Context, plugin string, hook cpex.HookType, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	c, ok := p.byName[plugin]
	if !ok {
		return nil, fmt.Errorf("plugin %s: %w", plugin, ErrUnknownPlugin)
	}
	return c.Invoke(ctx, hook, payload, pctx)
}

// Effective returns the merged configs of all plugins in pool order, and a
// generation that increases whenever any of them changes (the sum of the
// clients' generations, each of which only grows). The configs share their
// slices and maps with the clients: do not modify them.
func (p *Pool) Effective() (gen uint64, plugins []config.Plugin) {
	gen = p.Generation() // before the configs: a change in between shows next time
	plugins = make([]config.Plugin, len(p.clients))
	for i, c := range p.clients {
		plugins[i] = c.Effective()
	}
	return gen, plugins
}

// Generation returns the generation Effective would report, without copying
// the configs.
func (p *Pool) Generation() uint64 {
	var gen uint64
	for _, c := range p.clients {
		gen += c.Generation()
	}
	return gen
}

// State returns plugin's state; an unknown plugin is Down.
func (p *Pool) State(plugin string) State {
	if c, ok := p.byName[plugin]; ok {
		return c.State()
	}
	return Down
}

// States returns the state of every plugin, for readiness reports.
func (p *Pool) States() map[string]State {
	out := make(map[string]State, len(p.clients))
	for _, c := range p.clients {
		out[c.name] = c.State()
	}
	return out
}

// Stats returns plugin's counters; an unknown plugin has zero counters and
// state Down.
func (p *Pool) Stats(plugin string) Stats {
	if c, ok := p.byName[plugin]; ok {
		return c.Stats()
	}
	return Stats{State: Down}
}

// Close closes every client at once (see Client.Close), bounded by ctx.
func (p *Pool) Close(ctx context.Context) error {
	errs := make([]error, len(p.clients))
	var wg sync.WaitGroup
	for i, c := range p.clients {
		wg.Go(func() { errs[i] = c.Close(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
