package pluginclient

import (
	"context"
	"slices"

	"github.com/mcp-extproc/mcp-extproc/pkg/endpoints"
	"github.com/mcp-extproc/mcp-extproc/pkg/reconnect"
)

// endpointsChanged spreads the slots over the current addresses (at least
// one per address): slots of a removed address, and extra slots of an
// address that now needs fewer, drain (no new calls; closed once their
// calls in flight are done); new addresses get new slots. It implements
// endpoints.Options.OnChange.
func (c *Client) endpointsChanged(ch endpoints.Change) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	want := spread(c.size, ch.Current)
	old := slices.Clone(c.current())
	// Keep the ready slots first.
	slices.SortStableFunc(old, func(a, b *slot) int { return rank(a) - rank(b) })
	have := map[string]int{}
	var keep, drop, add []*slot
	for _, sl := range old {
		if have[sl.addr] < want[sl.addr] {
			keep = append(keep, sl)
			have[sl.addr]++
		} else {
			drop = append(drop, sl)
		}
	}
	// Several addresses are Pods (a headless Service); one may be a
	// Service's virtual IP, balanced per connection.
	direct := len(ch.Current) > 1
	for _, addr := range ch.Current {
		for ; have[addr] < want[addr]; have[addr]++ {
			sl := c.newSlot(addr, c.dialMCP(addr, direct))
			keep, add = append(keep, sl), append(add, sl)
		}
	}
	c.slots.Store(&keep)
	for _, sl := range add {
		sl.sup.Start(c.bg)
	}
	c.draining.Add(int64(len(drop)))
	c.mu.Unlock()

	c.log.Info().Strs("added", ch.Added).Strs("removed", ch.Removed).Int("sessions", len(keep)).
		Msg("plugin endpoints changed")
	for _, sl := range drop {
		c.wg.Go(func() { c.drain(sl) })
	}
	c.markResolved()
}

// drain closes a slot that no longer takes calls, once its calls in flight
// are done.
func (c *Client) drain(sl *slot) {
	sl.close(c.bg)
	c.draining.Add(-1)
	c.slotsChanged()
}

// rank orders slots for keeping: ready, then connecting, then down.
func rank(sl *slot) int {
	switch sl.sup.State() {
	case reconnect.Ready:
		return 0
	case reconnect.Connecting:
		return 1
	}
	return 2
}

// spread returns how many of size slots each address gets: an even share,
// the remainder to the first addresses, and at least one each.
func spread(size int, addrs []string) map[string]int {
	want := make(map[string]int, len(addrs))
	for i, a := range addrs {
		n := size / len(addrs)
		if i < size%len(addrs) {
			n++
		}
		want[a] = max(n, 1)
	}
	return want
}

// resolver wraps r so that a failed or empty first lookup ends the wait
// of the first calls (the plugin is then Down until a lookup succeeds).
func (c *Client) resolver(r endpoints.Resolver) endpoints.Resolver {
	if r == nil {
		r = endpoints.LookupHost
	}
	return func(ctx context.Context, host string) ([]string, error) {
		addrs, err := r(ctx, host)
		if err != nil || len(addrs) == 0 {
			c.log.Warn().Err(err).Str("host", host).Msg("plugin host has no address")
			c.markResolved()
		}
		return addrs, err
	}
}

// markResolved ends the wait for the first lookup.
func (c *Client) markResolved() {
	c.once.Do(func() { close(c.resolved) })
	c.slotsChanged()
}

// refreshEndpoints asks for a lookup soon (a connection failed).
func (c *Client) refreshEndpoints() {
	if c.watcher != nil {
		c.watcher.Refresh()
	}
}

// slotsChanged recomputes the plugin's state from its slots and reports it,
// with the sessions by state. It is called after every slot state change.
func (c *Client) slotsChanged() {
	slots := c.current()
	s := c.sessions()
	c.evMu.Lock()
	defer c.evMu.Unlock()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	from := c.state
	c.state = aggregate(slots, c.isResolved())
	to := c.state
	c.mu.Unlock()
	if from != to {
		switch {
		case to == Down:
			c.log.Error().Stringer("from", from).Msg("plugin down: every session's circuit is open; requests fail at once while reconnecting in the background")
		case from == Down:
			c.log.Info().Msg("plugin back: circuit closed")
		}
		c.ev.stateChange(from, to)
	}
	c.ev.sessions(&s)
}

// aggregate is the plugin's state: Ready while any slot is, Down when every
// slot is (or no endpoint is known after the first lookup), else Connecting.
func aggregate(slots []*slot, resolved bool) State {
	if len(slots) == 0 {
		if resolved {
			return Down
		}
		return Connecting
	}
	down := 0
	for _, sl := range slots {
		switch sl.sup.State() {
		case Ready:
			return Ready
		case Down:
			down++
		}
	}
	if down == len(slots) {
		return Down
	}
	return Connecting
}

func (c *Client) isResolved() bool {
	select {
	case <-c.resolved:
		return true
	default:
		return false
	}
}

// sessions counts the slots by state.
func (c *Client) sessions() Sessions {
	var s Sessions
	addrs := map[string]bool{}
	for _, sl := range c.current() {
		addrs[sl.addr] = true
		switch st := sl.sup.State(); {
		case st == Ready && sl.sup.Usable():
			s.Ready++
		case st == Ready:
			s.Rebuilding++
		case st == Down:
			s.Down++
		default:
			s.Connecting++
		}
	}
	s.Draining = int(c.draining.Load())
	s.Endpoints = len(addrs)
	return s
}
