package attribution

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
)

// BenchmarkRecordLookup is the hot path: one Record when a request is
// forwarded and one Lookup when its response comes back, on a store that is
// full (evicting), sessions spread as many clients would.
func BenchmarkRecordLookup(b *testing.B) {
	for _, shards := range []int{1, 16} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			s := New(Options{Shards: shards, MaxRequests: 16384})
			sessions := make([]string, 256)
			for i := range sessions {
				sessions[i] = fmt.Sprintf("0b6e1c3a-7d2f-4e88-9c1d-%012d", i)
			}
			o := Origin{Method: "tools/call", Name: "get-weather"}
			var next atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				buf := make([]byte, 0, 24)
				for pb.Next() {
					i := next.Add(1)
					sess := sessions[i%int64(len(sessions))]
					buf = fmt.Appendf(buf[:0], "%d", i)
					if err := s.Record(context.Background(), sess, buf, o); err != nil {
						b.Fatal(err)
					}
					if _, err := s.Lookup(context.Background(), sess, buf); errors.Is(err, ErrInvalidID) {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// BenchmarkLookup is a response's lookup alone (a hit), single goroutine.
func BenchmarkLookup(b *testing.B) {
	s := New(Options{})
	const sess = "0b6e1c3a-7d2f-4e88-9c1d-000000000001"
	id := []byte("42")
	if err := s.Record(context.Background(), sess, id, Origin{Method: "tools/call", Name: "get-weather"}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Lookup(context.Background(), sess, id); err != nil {
			b.Fatal(err)
		}
	}
}
