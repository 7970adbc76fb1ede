package contentcoding

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
)

const body = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"exec","arguments":{"cmd":"rm -rf /"}}}`

func encode(t testing.TB, coding string, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.WriteCloser
	switch coding {
	case "gzip":
		w = gzip.NewWriter(&buf)
	case "deflate":
		w = zlib.NewWriter(&buf)
	case "rawdeflate":
		w, _ = flate.NewWriter(&buf, flate.DefaultCompression)
	case "br":
		w = brotli.NewWriter(&buf)
	case "zstd":
		zw, err := zstd.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		w = zw
	default:
		t.Fatalf("no encoder for %s", coding)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestDecode(t *testing.T) {
	gz := encode(t, "gzip", []byte(body))
	tests := []struct {
		name    string
		header  string
		in      []byte
		limit   int64
		want    string
		wantErr error
	}{
		{name: "identity", header: "identity", in: []byte(body), limit: 1 << 20, want: body},
		{name: "empty header", header: "", in: []byte(body), limit: 1 << 20, want: body},
		{name: "gzip", header: "gzip", in: gz, limit: 1 << 20, want: body},
		{name: "x-gzip upper case", header: " X-GZIP ", in: gz, limit: 1 << 20, want: body},
		{name: "deflate (zlib)", header: "deflate", in: encode(t, "deflate", []byte(body)), limit: 1 << 20, want: body},
		{name: "deflate (raw)", header: "deflate", in: encode(t, "rawdeflate", []byte(body)), limit: 1 << 20, want: body},
		{name: "br", header: "br", in: encode(t, "br", []byte(body)), limit: 1 << 20, want: body},
		{name: "zstd", header: "zstd", in: encode(t, "zstd", []byte(body)), limit: 1 << 20, want: body},
		{name: "stacked gzip then br", header: "gzip, br", in: encode(t, "br", gz), limit: 1 << 20, want: body},
		{name: "unknown coding", header: "compress", in: []byte(body), limit: 1 << 20, wantErr: ErrUnsupported},
		{name: "corrupt gzip", header: "gzip", in: []byte("not gzip"), limit: 1 << 20, wantErr: ErrCorrupt},
		{name: "truncated gzip", header: "gzip", in: gz[:len(gz)-5], limit: 1 << 20, wantErr: ErrCorrupt},
		{name: "bomb over the limit", header: "gzip", in: encode(t, "gzip", []byte(strings.Repeat("a", 1<<20))), limit: 4096, wantErr: ErrTooLarge},
		{name: "exactly the limit", header: "gzip", in: gz, limit: int64(len(body)), want: body},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode(tt.header, tt.in, tt.limit)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// FuzzDecode: any input either decodes within the limit or fails with one
// of the package's errors; never a panic or an over-limit result.
func FuzzDecode(f *testing.F) {
	for _, c := range []string{"gzip", "deflate", "br", "zstd"} {
		f.Add(c, encode(f, c, []byte(body)))
	}
	f.Add("gzip", []byte{0x1f, 0x8b})
	f.Fuzz(func(t *testing.T, coding string, in []byte) {
		const limit = 1 << 16
		out, err := Decode(coding, in, limit)
		if err != nil {
			if !errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if len(out) > limit && len(out) != len(in) {
			t.Fatalf("decoded %d bytes over the limit", len(out))
		}
	})
}
