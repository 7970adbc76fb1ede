package endpoints_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/mcp-extproc/mcp-extproc/pkg/endpoints"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const testTimeout = 10 * time.Second

// script is a fake resolver answering its steps in order, repeating the
// last one.
type script struct {
	mu    sync.Mutex
	steps []step
	hosts []string
}

type step struct {
	addrs []string
	err   error
}

func (s *script) resolve(_ context.Context, host string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hosts = append(s.hosts, host)
	st := s.steps[0]
	if len(s.steps) > 1 {
		s.steps = s.steps[1:]
	}
	return st.addrs, st.err
}

// run starts w.Run and returns the changes channel and a stop function that
// waits for Run to return.
func run(t *testing.T, host string, opts endpoints.Options) (*endpoints.Watcher, <-chan endpoints.Change) {
	t.Helper()
	changes := make(chan endpoints.Change, 16)
	opts.OnChange = func(c endpoints.Change) { changes <- c }
	w := endpoints.New(host, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
	})
	return w, changes
}

func next(t *testing.T, changes <-chan endpoints.Change) endpoints.Change {
	t.Helper()
	select {
	case c := <-changes:
		return c
	case <-time.After(testTimeout):
		t.Fatal("no change reported")
		return endpoints.Change{}
	}
}

// TestFollowsScaleUpAndDown: 1 → 3 → 2 addresses, each step asked for by
// Refresh (as a client does when a connection fails).
func TestFollowsScaleUpAndDown(t *testing.T) {
	s := &script{steps: []step{
		{addrs: []string{"10.0.0.1"}},
		{addrs: []string{"10.0.0.3", "10.0.0.1", "10.0.0.2", "10.0.0.3"}},
		{addrs: []string{"10.0.0.3", "10.0.0.2"}},
	}}
	w, changes := run(t, "plugin.ns.svc", endpoints.Options{Resolver: s.resolve, Interval: time.Hour, MinInterval: -1})
	want := []endpoints.Change{
		{Added: []string{"10.0.0.1"}, Current: []string{"10.0.0.1"}},
		{Added: []string{"10.0.0.2", "10.0.0.3"}, Current: []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}},
		{Removed: []string{"10.0.0.1"}, Current: []string{"10.0.0.2", "10.0.0.3"}},
	}
	for i, wc := range want {
		if i > 0 {
			w.Refresh()
		}
		if diff := cmp.Diff(wc, next(t, changes)); diff != "" {
			t.Fatalf("change %d (-want +got):\n%s", i, diff)
		}
	}
	if diff := cmp.Diff([]string{"10.0.0.2", "10.0.0.3"}, w.Addresses()); diff != "" {
		t.Errorf("Addresses (-want +got):\n%s", diff)
	}
	if s.hosts[0] != "plugin.ns.svc" {
		t.Errorf("looked up %q", s.hosts[0])
	}
}

// TestFailedLookupKeepsAddresses: a DNS failure drains nothing; the next
// success reports the change against the last known set.
func TestFailedLookupKeepsAddresses(t *testing.T) {
	boom := errors.New("SERVFAIL")
	s := &script{steps: []step{
		{addrs: []string{"10.0.0.1", "10.0.0.2"}},
		{err: boom},
		{addrs: []string{"10.0.0.2"}},
	}}
	w, changes := run(t, "plugin", endpoints.Options{Resolver: s.resolve, Interval: time.Hour, MinInterval: -1})
	next(t, changes)
	w.Refresh()
	deadline := time.Now().Add(testTimeout)
	for w.Lookups() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if err := w.Err(); !errors.Is(err, boom) {
		t.Errorf("Err() = %v, want %v", err, boom)
	}
	if got := w.Addresses(); len(got) != 2 {
		t.Errorf("after a failed lookup Addresses() = %v, want both kept", got)
	}
	select {
	case c := <-changes:
		t.Fatalf("a failed lookup reported %+v", c)
	default:
	}
	w.Refresh()
	if diff := cmp.Diff(endpoints.Change{Removed: []string{"10.0.0.1"}, Current: []string{"10.0.0.2"}}, next(t, changes)); diff != "" {
		t.Errorf("change (-want +got):\n%s", diff)
	}
	if w.Err() != nil {
		t.Errorf("Err() = %v after a good lookup", w.Err())
	}
}

// TestPeriodicLookup: without Refresh, the host is looked up again every
// Interval.
func TestPeriodicLookup(t *testing.T) {
	s := &script{steps: []step{{addrs: []string{"10.0.0.1"}}, {addrs: []string{"10.0.0.9"}}}}
	_, changes := run(t, "plugin", endpoints.Options{Resolver: s.resolve, Interval: time.Millisecond})
	next(t, changes)
	if c := next(t, changes); len(c.Added) != 1 || c.Added[0] != "10.0.0.9" {
		t.Errorf("periodic change %+v", c)
	}
}

// TestIPLiteralIsOneEndpoint: never looked up.
func TestIPLiteralIsOneEndpoint(t *testing.T) {
	for _, host := range []string{"127.0.0.1", "::1"} {
		t.Run(host, func(t *testing.T) {
			resolver := func(context.Context, string) ([]string, error) {
				t.Error("an IP literal was looked up")
				return nil, nil
			}
			w, changes := run(t, host, endpoints.Options{Resolver: resolver, Interval: time.Millisecond, MinInterval: -1})
			if diff := cmp.Diff(endpoints.Change{Added: []string{host}, Current: []string{host}}, next(t, changes)); diff != "" {
				t.Errorf("change (-want +got):\n%s", diff)
			}
			w.Refresh()
		})
	}
}

func TestDiff(t *testing.T) {
	tests := []struct {
		prev, next, added, removed []string
	}{
		{nil, nil, nil, nil},
		{nil, []string{"a"}, []string{"a"}, nil},
		{[]string{"a"}, nil, nil, []string{"a"}},
		{[]string{"a", "b"}, []string{"a", "b"}, nil, nil},
		{[]string{"a", "c"}, []string{"b", "c", "d"}, []string{"b", "d"}, []string{"a"}},
	}
	for _, tt := range tests {
		c := endpoints.Diff(tt.prev, tt.next)
		if !cmp.Equal(c.Added, tt.added) || !cmp.Equal(c.Removed, tt.removed) {
			t.Errorf("Diff(%v, %v) = +%v -%v, want +%v -%v", tt.prev, tt.next, c.Added, c.Removed, tt.added, tt.removed)
		}
	}
}

func TestHostPort(t *testing.T) {
	tests := []struct {
		url, host, port string
		ok              bool
	}{
		{"http://plugin.ns.svc:8000/mcp", "plugin.ns.svc", "8000", true},
		{"https://plugin/mcp", "plugin", "443", true},
		{"http://[::1]/mcp", "::1", "80", true},
		{"ftp://x/", "", "", false},
		{"http:///mcp", "", "", false},
	}
	for _, tt := range tests {
		host, port, err := endpoints.HostPort(tt.url)
		if (err == nil) != tt.ok || host != tt.host || port != tt.port {
			t.Errorf("HostPort(%q) = %q, %q, %v", tt.url, host, port, err)
		}
	}
}

// TestRealResolver: the default resolver answers localhost without a
// network.
func TestRealResolver(t *testing.T) {
	_, changes := run(t, "localhost", endpoints.Options{Interval: time.Hour})
	if c := next(t, changes); len(c.Current) == 0 {
		t.Errorf("localhost resolved to nothing: %+v", c)
	}
}
