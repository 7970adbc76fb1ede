package pluginclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient/wireconn"
	"github.com/mcp-extproc/mcp-extproc/pkg/reconnect"
)

// invoke is the path of one call: choose a slot, send, and if nothing
// answered, one retry: on the same session when it still answers (the
// connection under the call ended, the session did not), else on that
// slot rebuilt (or another slot when it cannot be). An answer about the
// call, whatever it says, is returned and never retried: a plugin with side
// effects must not run twice.
func (c *Client) invoke(ctx context.Context, hook cpex.HookType, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	if _, ok := ctx.Deadline(); !ok && c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	if pctx == nil {
		pctx = cpex.NewContext(cpex.GlobalContext{})
	}
	sl, h, err := c.pick(ctx, nil)
	if err != nil {
		return nil, c.wrap(ctx, err)
	}
	reply, err := sl.call(ctx, h, hook, payload, pctx)
	if err == nil || ctx.Err() != nil || !unanswered(err) {
		return reply, c.wrap(ctx, err)
	}
	sl, h, err = c.recover(ctx, sl, h, err)
	if err != nil {
		return nil, c.wrap(ctx, err)
	}
	reply, err = sl.call(ctx, h, hook, payload, pctx)
	if err != nil && ctx.Err() == nil {
		c.log.Warn().Err(err).Str("addr", sl.addr).Msg("plugin call failed again after getting no answer")
		if unanswered(err) {
			sl.invalidate(h, err)
		}
	}
	c.ev.retry(err == nil)
	return reply, c.wrap(ctx, err)
}

// unanswered reports whether a call's error means nothing answered it: the
// connection or session is gone (ErrConnLost), or the call got no answer
// (ErrNoAnswer).
func unanswered(err error) bool {
	return errors.Is(err, ErrConnLost) || errors.Is(err, wireconn.ErrNoAnswer)
}

// recover returns where to retry a call that got no answer on h (err):
// h itself if its session answers a ping, else h's slot rebuilt.
func (c *Client) recover(ctx context.Context, sl *slot, h *held, err error) (*slot, *held, error) {
	if !errors.Is(err, ErrConnLost) && sl.enter(h) {
		perr := h.conn.Health(ctx)
		if perr == nil {
			return sl, h, nil
		}
		sl.leave(h)
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		err = perr
	}
	sl.invalidate(h, err)
	return c.pickAfterLoss(ctx, sl, h)
}

// pickAfterLoss enters the retry of a call whose connection (lost) was
// lost: on the same slot once it is rebuilt, since a new connection lands on
// a live server (a restarted plugin, or another replica) while the other
// slots may hold connections to the same dying server (one that answers 503
// while it shuts down fails every session it holds). Only when that slot
// cannot be rebuilt (its circuit opened) does the retry go to another slot.
func (c *Client) pickAfterLoss(ctx context.Context, sl *slot, lost *held) (*slot, *held, error) {
	err := sl.sup.Rebuild(ctx, lost.epoch)
	if ctx.Err() != nil {
		return nil, nil, err
	}
	if err == nil {
		if h := sl.current(); h != nil && h.epoch != lost.epoch && sl.enter(h) {
			return sl, h, nil
		}
	}
	return c.pick(ctx, sl)
}

// call runs hook on h, a Conn the caller entered; it leaves it.
func (sl *slot) call(ctx context.Context, h *held, hook cpex.HookType, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	defer sl.leave(h)
	return h.conn.InvokeHook(ctx, hook, sl.c.name, payload, pctx)
}

// enter registers a call on h, the slot's Conn; it fails once h is
// retiring.
func (sl *slot) enter(h *held) bool {
	if !h.enter() {
		return false
	}
	sl.inflight.Add(1)
	return true
}

// leave ends a call registered by enter.
func (sl *slot) leave(h *held) {
	sl.inflight.Add(-1)
	h.leave()
}

// pick enters a call on the usable slot with the fewest calls in flight
// (avoid only if no other is usable). With none usable it waits for a slot
// that is connecting or rebuilding; with every slot down it fails with
// reconnect.ErrOpen.
func (c *Client) pick(ctx context.Context, avoid *slot) (*slot, *held, error) {
	for {
		slots, err := c.slotsFor(ctx)
		if err != nil {
			return nil, nil, err
		}
		sl := c.choose(slots, avoid)
		if sl != nil && avoid != nil && sl.inflight.Load() > 0 && avoid.sup.State() != reconnect.Down {
			// Every other slot is busy: the slot being rebuilt is likely
			// free first (a pinned session carries one call at a time).
			_, _ = avoid.sup.Acquire(ctx)
			avoid = nil
			continue
		}
		if sl != nil {
			if h := sl.current(); h != nil && sl.enter(h) {
				return sl, h, nil
			}
			continue // replaced meanwhile: choose again
		}
		avoid = nil
		sl = waitable(slots)
		if sl == nil { // every slot down
			sl = slots[0]
		}
		if _, err := sl.sup.Acquire(ctx); err != nil && (!errors.Is(err, reconnect.ErrOpen) || waitable(slots) == nil) {
			return nil, nil, err
		}
	}
}

// slotsFor returns the slots taking calls, waiting for the first endpoint
// lookup. With none it fails with reconnect.ErrOpen (or the life-cycle
// error).
func (c *Client) slotsFor(ctx context.Context) ([]*slot, error) {
	select {
	case <-c.resolved:
	default:
		if err := c.lifeErr(); err != nil {
			return nil, err
		}
		select {
		case <-c.resolved:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	slots := c.current()
	if len(slots) == 0 {
		if err := c.lifeErr(); err != nil {
			return nil, err
		}
		c.refreshEndpoints()
		return nil, fmt.Errorf("%w: no endpoint address for %s", reconnect.ErrOpen, c.url)
	}
	return slots, nil
}

// lifeErr returns ErrNotStarted before Start, ErrStopped after Close.
func (c *Client) lifeErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return reconnect.ErrStopped
	case c.cancel == nil:
		return reconnect.ErrNotStarted
	case c.bg.Err() != nil:
		return reconnect.ErrStopped
	}
	return nil
}

// choose returns the usable slot with the fewest calls in flight, starting
// the scan at a rotating index so that ties take turns.
func (c *Client) choose(slots []*slot, avoid *slot) *slot {
	var best *slot
	var load int64
	start := int(c.next.Add(1) % uint64(len(slots)))
	for i := range slots {
		sl := slots[(start+i)%len(slots)]
		if sl == avoid || !sl.usable() {
			continue
		}
		if n := sl.inflight.Load(); best == nil || n < load {
			best, load = sl, n
		}
	}
	if best == nil && avoid != nil && avoid.usable() {
		return avoid
	}
	return best
}

// waitable returns a slot worth waiting for: connecting, or rebuilding with
// its circuit closed; nil when every slot is down.
func waitable(slots []*slot) *slot {
	for _, sl := range slots {
		if sl.sup.State() != reconnect.Down {
			return sl
		}
	}
	return nil
}

// wrap maps err to the package's sentinels, naming the plugin. Context
// errors are judged from ctx itself, not from err's chain.
func (c *Client) wrap(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("plugin %s: %w: %w", c.name, ErrTimeout, context.DeadlineExceeded)
	case ctx.Err() != nil:
		return fmt.Errorf("plugin %s: %w", c.name, ctx.Err())
	case errors.Is(err, reconnect.ErrOpen):
		return fmt.Errorf("plugin %s: %w: %v", c.name, ErrPluginDown, err)
	case errors.Is(err, reconnect.ErrStopped):
		return fmt.Errorf("plugin %s: %w", c.name, ErrClosed)
	case errors.Is(err, reconnect.ErrNotStarted):
		return fmt.Errorf("plugin %s: %w", c.name, ErrNotStarted)
	}
	return fmt.Errorf("plugin %s: %w", c.name, err)
}
