package reconnect

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestBackoffCeiling(t *testing.T) {
	const maxDur = time.Duration(1<<63 - 1)
	tests := []struct {
		name string
		b    Backoff
		n    int
		want time.Duration
	}{
		{"zero", Backoff{}, 3, 0},
		{"first", Backoff{Base: 100 * time.Millisecond, Max: time.Second}, 0, 100 * time.Millisecond},
		{"second", Backoff{Base: 100 * time.Millisecond, Max: time.Second}, 1, 200 * time.Millisecond},
		{"fourth", Backoff{Base: 100 * time.Millisecond, Max: time.Second}, 3, 800 * time.Millisecond},
		{"capped", Backoff{Base: 100 * time.Millisecond, Max: time.Second}, 4, time.Second},
		{"capped far", Backoff{Base: 100 * time.Millisecond, Max: time.Second}, 1000, time.Second},
		{"negative n", Backoff{Base: 100 * time.Millisecond}, -2, 100 * time.Millisecond},
		{"no cap", Backoff{Base: time.Millisecond}, 10, 1024 * time.Millisecond},
		{"no cap overflow", Backoff{Base: time.Millisecond}, 200, maxDur},
		{"base above max", Backoff{Base: 2 * time.Second, Max: time.Second}, 0, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.b.Ceiling(tt.n); got != tt.want {
				t.Errorf("Ceiling(%d) = %v, want %v", tt.n, got, tt.want)
			}
		})
	}
}

func TestBackoffDelayFullJitter(t *testing.T) {
	b := Backoff{Base: 100 * time.Millisecond, Max: time.Second}
	for n := range 8 {
		ceil := b.Ceiling(n)
		// The injected source sees the whole closed range [0, ceiling].
		var gotN int64
		lo := Backoff{Base: b.Base, Max: b.Max, Rand: func(m int64) int64 { gotN = m; return 0 }}
		if d := lo.Delay(n); d != 0 {
			t.Errorf("Delay(%d) with lowest draw = %v, want 0", n, d)
		}
		if gotN != int64(ceil)+1 {
			t.Errorf("Delay(%d) drew from [0,%d), want [0,%d)", n, gotN, int64(ceil)+1)
		}
		hi := Backoff{Base: b.Base, Max: b.Max, Rand: func(m int64) int64 { return m - 1 }}
		if d := hi.Delay(n); d != ceil {
			t.Errorf("Delay(%d) with highest draw = %v, want %v", n, d, ceil)
		}
	}

	// With the real source, draws stay in bounds and spread over the range.
	const n = 2
	ceil := b.Ceiling(n)
	var low, high bool
	for range 2000 {
		d := b.Delay(n)
		if d < 0 || d > ceil {
			t.Fatalf("Delay(%d) = %v, outside [0, %v]", n, d, ceil)
		}
		low = low || d < ceil/2
		high = high || d > ceil/2
	}
	if !low || !high {
		t.Errorf("2000 draws never fell on both halves of [0, %v] (low=%v high=%v): no jitter", ceil, low, high)
	}

	if d := (Backoff{}).Delay(5); d != 0 {
		t.Errorf("zero Backoff Delay = %v, want 0", d)
	}
}

func TestSleep(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	if err := Sleep(ctx, 0); err != nil {
		t.Fatalf("Sleep(0) = %v", err)
	}
	if err := Sleep(ctx, time.Microsecond); err != nil {
		t.Fatalf("Sleep(1µs) = %v", err)
	}
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on cancelled ctx = %v, want context.Canceled", err)
	}
}
