package pluginclient

import (
	"context"
	"errors"
	"time"
)

// healthLoop checks the slots every interval until ctx is done.
func (c *Client) healthLoop(ctx context.Context) {
	t := time.NewTicker(c.health)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, sl := range c.current() {
			c.healthCheck(ctx, sl)
		}
	}
}

// healthCheck probes a usable slot's connection once. A lost connection is
// rebuilt right away, before a request finds it dead. While a slot's
// circuit is open or its connection pending, its supervisor's loop does
// the probing.
func (c *Client) healthCheck(ctx context.Context, sl *slot) {
	if !sl.usable() {
		return
	}
	h := sl.current()
	if h == nil || !h.enter() {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, min(c.timeout, c.health))
	err := h.conn.Health(pctx)
	cancel()
	h.leave()
	if ctx.Err() != nil {
		return
	}
	c.ev.health(err == nil)
	if err == nil {
		return
	}
	c.log.Warn().Err(err).Str("addr", sl.addr).Msg("plugin health check failed")
	if errors.Is(err, ErrConnLost) {
		sl.invalidate(h, err)
	}
}
