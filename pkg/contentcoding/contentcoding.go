// Package contentcoding decodes HTTP request bodies sent with a
// Content-Encoding, with a cap on the decoded size, so the sidecar can
// inspect exactly what the MCP server would read. Supported: gzip, x-gzip,
// deflate (zlib, and raw deflate as some clients send it), br, zstd, and
// identity; a list of codings ("gzip, br") is undone in reverse order.
package contentcoding

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
)

// Errors reported by Decode, for errors.Is.
var (
	// ErrUnsupported: a coding this package does not know.
	ErrUnsupported = errors.New("unsupported content-encoding")
	// ErrTooLarge: the decoded body exceeds the limit.
	ErrTooLarge = errors.New("decoded body exceeds the limit")
	// ErrCorrupt: the body is not valid for its coding.
	ErrCorrupt = errors.New("body does not match its content-encoding")
)

// Decode undoes the codings listed in header (a Content-Encoding value) on
// body and returns the decoded bytes. limit caps the decoded size of each
// step; a body that would exceed it is an ErrTooLarge error, detected
// without decoding more than limit+1 bytes. An empty or "identity" header
// returns body itself.
func Decode(header string, body []byte, limit int64) ([]byte, error) {
	codings := strings.Split(header, ",")
	for i := len(codings) - 1; i >= 0; i-- {
		c := strings.ToLower(strings.TrimSpace(codings[i]))
		if c == "" || c == "identity" {
			continue
		}
		out, err := decodeOne(c, body, limit)
		if err != nil {
			return nil, fmt.Errorf("content-encoding %s: %w", c, err)
		}
		body = out
	}
	return body, nil
}

func decodeOne(coding string, body []byte, limit int64) ([]byte, error) {
	var r io.Reader
	switch coding {
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		defer zr.Close()
		r = zr
	case "deflate":
		// RFC 9110 "deflate" is zlib-wrapped; some clients send raw deflate.
		if zr, err := zlib.NewReader(bytes.NewReader(body)); err == nil {
			defer zr.Close()
			r = zr
		} else {
			fr := flate.NewReader(bytes.NewReader(body))
			defer fr.Close()
			r = fr
		}
	case "br":
		r = brotli.NewReader(bytes.NewReader(body))
	case "zstd":
		zr, err := zstd.NewReader(bytes.NewReader(body), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(limit)+1<<20))
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		defer zr.Close()
		r = zr
	default:
		return nil, ErrUnsupported
	}
	out, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if int64(len(out)) > limit {
		return nil, ErrTooLarge
	}
	return out, nil
}

// Normalize returns a Content-Encoding header value lower-cased and
// trimmed, and "" when it names no coding to undo (empty or "identity").
func Normalize(header string) string {
	v := strings.ToLower(strings.TrimSpace(header))
	if v == "identity" {
		return ""
	}
	return v
}
