// Package endpoints discovers the addresses behind a plugin's host name, so
// that a client can keep sessions on every replica of a plugin: a headless
// Kubernetes Service resolves to one address per ready pod, and no
// Kubernetes API access is needed to follow it.
//
// A [Watcher] resolves its host when it starts, again every
// [Options.Interval], and soon after [Watcher.Refresh] (a client calls it
// when a connection to an address fails). Each time the set of addresses
// changes it reports a [Change] (added, removed, current) to
// [Options.OnChange], one at a time, from the goroutine running
// [Watcher.Run]. A host that is an IP literal is its one endpoint and is
// never looked up.
//
// A failed lookup keeps the last known addresses: a DNS hiccup must not
// drain healthy sessions. A lookup that succeeds with no address removes
// them all.
package endpoints

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"sync"
	"time"
)

// Defaults of [Options].
const (
	// DefaultInterval is how often a host is resolved again. It is short
	// against a rolling restart (about the time a pod takes to start) and
	// long against DNS load; Kubernetes DNS caches for 5 s to 30 s anyway.
	DefaultInterval = 10 * time.Second
	// DefaultMinInterval is the least time between two lookups that
	// Refresh asks for, however many failures ask.
	DefaultMinInterval = time.Second
	// DefaultTimeout bounds one lookup.
	DefaultTimeout = 5 * time.Second
)

// Resolver returns the addresses (IP literals) of host.
type Resolver func(ctx context.Context, host string) ([]string, error)

// LookupHost is the default Resolver: the system resolver, as the Go
// standard library configures it (/etc/resolv.conf in a pod).
func LookupHost(ctx context.Context, host string) ([]string, error) {
	return net.DefaultResolver.LookupHost(ctx, host)
}

// Change is one change of a host's addresses. Added and Removed are sorted;
// Current is the whole sorted set after the change.
type Change struct {
	Added, Removed, Current []string
}

// Options configures a Watcher. The zero value means the defaults.
type Options struct {
	// Resolver looks the host up. Default: LookupHost.
	Resolver Resolver
	// Interval between periodic lookups. Default DefaultInterval.
	Interval time.Duration
	// MinInterval between lookups asked for by Refresh. Default
	// DefaultMinInterval; negative: no limit.
	MinInterval time.Duration
	// Timeout of one lookup. Default DefaultTimeout.
	Timeout time.Duration
	// OnChange receives every change, serially, from Run's goroutine. It
	// must not call Run; it may call Refresh and Addresses.
	OnChange func(Change)
}

// Watcher follows the addresses of one host. Create it with New, run it
// with Run; its other methods are safe for concurrent use.
type Watcher struct {
	host    string
	literal bool
	opts    Options
	refresh chan struct{} // capacity 1: pending Refresh requests coalesce

	mu      sync.Mutex
	current []string
	lastErr error
	lookups int
}

// New returns a Watcher for host (a name or an IP literal, without port).
func New(host string, opts Options) *Watcher {
	if opts.Resolver == nil {
		opts.Resolver = LookupHost
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.MinInterval == 0 {
		opts.MinInterval = DefaultMinInterval
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	return &Watcher{
		host:    host,
		literal: net.ParseIP(host) != nil,
		opts:    opts,
		refresh: make(chan struct{}, 1),
	}
}

// Host returns the host the Watcher follows.
func (w *Watcher) Host() string { return w.host }

// Addresses returns the current sorted addresses (nil before the first
// successful lookup).
func (w *Watcher) Addresses() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.current)
}

// Err returns the error of the last lookup, nil if it succeeded.
func (w *Watcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastErr
}

// Lookups returns how many lookups were made.
func (w *Watcher) Lookups() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lookups
}

// Refresh asks Run for a lookup soon (at most one per MinInterval). It
// never blocks; requests made before the lookup starts are one request.
func (w *Watcher) Refresh() {
	select {
	case w.refresh <- struct{}{}:
	default:
	}
}

// Run resolves the host at once, then periodically and on Refresh, until
// ctx ends; it then returns ctx.Err(). For an IP literal it reports the one
// endpoint and waits for ctx.
func (w *Watcher) Run(ctx context.Context) error {
	if w.literal {
		w.update([]string{w.host}, nil)
		<-ctx.Done()
		return ctx.Err()
	}
	w.resolve(ctx)
	last := time.Now()
	tick := time.NewTicker(w.opts.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		case <-w.refresh:
			if wait := w.opts.MinInterval - time.Since(last); wait > 0 {
				if !sleep(ctx, wait) {
					return ctx.Err()
				}
			}
		}
		w.resolve(ctx)
		last = time.Now()
	}
}

// sleep waits d or until ctx ends, reporting whether d elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// resolve looks the host up once and applies the result.
func (w *Watcher) resolve(ctx context.Context) {
	lctx, cancel := context.WithTimeout(ctx, w.opts.Timeout)
	addrs, err := w.opts.Resolver(lctx, w.host)
	cancel()
	if err != nil && ctx.Err() != nil {
		return // shutting down: not a lookup failure
	}
	if err != nil {
		err = fmt.Errorf("resolve %s: %w", w.host, err)
	}
	w.update(addrs, err)
}

// update records a lookup's outcome and reports the change, if any.
func (w *Watcher) update(addrs []string, err error) {
	w.mu.Lock()
	w.lookups++
	w.lastErr = err
	if err != nil {
		w.mu.Unlock()
		return
	}
	next := normalize(addrs)
	ch := Diff(w.current, next)
	w.current = next
	w.mu.Unlock()
	if (len(ch.Added) > 0 || len(ch.Removed) > 0) && w.opts.OnChange != nil {
		w.opts.OnChange(ch)
	}
}

// normalize returns addrs sorted, without duplicates, as a non-nil slice.
func normalize(addrs []string) []string {
	out := append(make([]string, 0, len(addrs)), addrs...)
	slices.Sort(out)
	return slices.Compact(out)
}

// Diff returns the change from the sorted set prev to the sorted set next.
func Diff(prev, next []string) Change {
	ch := Change{Current: slices.Clone(next)}
	i, j := 0, 0
	for i < len(prev) || j < len(next) {
		switch {
		case j == len(next) || (i < len(prev) && prev[i] < next[j]):
			ch.Removed = append(ch.Removed, prev[i])
			i++
		case i == len(prev) || next[j] < prev[i]:
			ch.Added = append(ch.Added, next[j])
			j++
		default:
			i++
			j++
		}
	}
	return ch
}

// HostPort returns the host to watch and the port to dial for a plugin URL
// (http or https; the scheme's port if none is given). The host of an IPv6
// literal is returned without brackets.
func HostPort(rawURL string) (host, port string, err error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", "", fmt.Errorf("plugin url: %w", err)
	}
	host, port = u.Hostname(), u.Port()
	if host == "" {
		return "", "", fmt.Errorf("plugin url %q: no host", rawURL)
	}
	if port == "" {
		switch u.Scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		default:
			return "", "", fmt.Errorf("plugin url %q: want http or https", rawURL)
		}
	}
	return host, port, nil
}
