package sse

import (
	"bytes"
	"testing"
)

// stream1MiB repeats the recorded progress stream and tools/list event up
// to at least 1 MiB of whole events.
func stream1MiB(b *testing.B) []byte {
	fx := readFixtures(b)
	unit := append(append([]byte(nil), fx["tools-call-progress"]...), fx["tools-list"]...)
	var s bytes.Buffer
	for s.Len() < 1<<20 {
		s.Write(unit)
	}
	return s.Bytes()
}

// BenchmarkFeed feeds a 1 MiB stream in 16 KiB chunks to one decoder; events
// straddle every chunk boundary.
func BenchmarkFeed(b *testing.B) {
	stream := stream1MiB(b)
	const chunk = 16 << 10
	var d Decoder
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		for i := 0; i < len(stream); i += chunk {
			events, err := d.Feed(stream[i:min(i+chunk, len(stream))])
			if err != nil {
				b.Fatal(err)
			}
			n += len(events)
		}
	}
	if len(d.Pending()) != 0 {
		b.Fatalf("pending %d bytes", len(d.Pending()))
	}
	if n == 0 {
		b.Fatal("no events")
	}
}

// BenchmarkFeedCRLF is BenchmarkFeed on the same stream with CRLF line
// endings.
func BenchmarkFeedCRLF(b *testing.B) {
	stream := bytes.ReplaceAll(stream1MiB(b), []byte("\n"), []byte("\r\n"))
	const chunk = 16 << 10
	var d Decoder
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		for i := 0; i < len(stream); i += chunk {
			if _, err := d.Feed(stream[i:min(i+chunk, len(stream))]); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkWithData(b *testing.B) {
	var d Decoder
	events, err := d.Feed(readFixtures(b)["tools-call-echo"])
	if err != nil || len(events) != 1 {
		b.Fatal(err)
	}
	e := events[0]
	data := []byte(`{"result":{"content":[{"type":"text","text":"[REDACTED]"}]},"jsonrpc":"2.0","id":3}`)
	b.ReportAllocs()
	for b.Loop() {
		_ = e.WithData(data)
	}
}
