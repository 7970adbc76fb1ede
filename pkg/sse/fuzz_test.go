package sse

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// chunksOf cuts in into chunks whose sizes come from cuts (each byte gives
// a size 1..256, cycling; no cuts means one chunk).
func chunksOf(in, cuts []byte) [][]byte {
	if len(cuts) == 0 {
		return [][]byte{in}
	}
	var out [][]byte
	for k := 0; len(in) > 0; k++ {
		n := int(cuts[k%len(cuts)]) + 1
		n = min(n, len(in))
		out = append(out, in[:n])
		in = in[n:]
	}
	return out
}

// FuzzDecode checks, for any input cut at any points: the events' Raw plus
// the pending bytes reproduce the input exactly; the events mean the same as
// when the input comes in one chunk; and WithData(e.Data) re-parses to the
// same fields. Seeds: testdata/fuzz/FuzzDecode (the recorded streams among
// them).
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, in, cuts []byte) {
		var d Decoder
		var out []byte
		var got []ev
		var all []Event
		for _, c := range chunksOf(in, cuts) {
			events, err := d.Feed(c)
			if err != nil {
				t.Fatalf("Feed: %v", err)
			}
			for _, e := range events {
				out = append(out, e.Raw...)
				got = append(got, toEv(e))
				checkWithData(t, e, len(all) == 0)
				all = append(all, e)
			}
		}
		out = append(out, d.Pending()...)
		if !bytes.Equal(out, in) {
			t.Fatalf("events + pending = %q, want %q", out, in)
		}
		if e, ok := d.Flush(); ok {
			got = append(got, toEv(e))
			checkWithData(t, e, len(all) == 0)
		}
		whole, _ := decodeChunks(t, [][]byte{in})
		if diff := cmp.Diff(semantic(whole), semantic(got)); diff != "" {
			t.Fatalf("chunked decoding differs (-whole +chunked):\n%s", diff)
		}
	})
}

// checkWithData re-parses e.WithData(e.Data) and e.WithData(other data).
func checkWithData(t *testing.T, e Event, first bool) {
	t.Helper()
	for _, data := range [][]byte{e.Data, []byte("x\ny"), nil} {
		out := e.WithData(data)
		var d Decoder
		if !first {
			// Only a stream's first event may start with a byte order mark.
			d.started = true
		}
		events, err := d.Feed(out)
		if err != nil {
			t.Fatalf("Feed(WithData): %v", err)
		}
		var re []Event
		for _, x := range events {
			if x.Data != nil || x.Type != nil || x.ID != nil {
				re = append(re, x)
			}
		}
		if fe, ok := d.Flush(); ok {
			re = append(re, fe)
		}
		if data == nil && e.Type == nil && e.ID == nil {
			if len(re) != 0 && re[0].Data != nil {
				t.Fatalf("WithData(nil) = %q still has data", out)
			}
			continue
		}
		if len(re) != 1 {
			t.Fatalf("WithData(%q) of %q = %q: %d events", data, e.Raw, out, len(re))
		}
		r := re[0]
		if !bytes.Equal(r.Data, data) || (r.Data == nil) != (data == nil) || !bytes.Equal(r.Type, e.Type) || !bytes.Equal(r.ID, e.ID) || r.Terminated() != e.Terminated() {
			t.Fatalf("WithData(%q) of %q = %q re-parses as %+v", data, e.Raw, out, toEv(r))
		}
	}
}
