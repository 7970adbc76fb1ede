package envoytest

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// bodySource yields a body chunk by chunk, as the codec hands data to Envoy's
// filter chain. last reports the chunk that carries end_stream; a source may
// end with an empty last chunk (HTTP/1 chunked encoding's terminal chunk).
type bodySource interface {
	next(ctx context.Context) (chunk []byte, last bool, err error)
}

// sliceSource yields chunks known in advance.
type sliceSource struct {
	chunks [][]byte
	i      int
}

func (s *sliceSource) next(context.Context) ([]byte, bool, error) {
	if s.i >= len(s.chunks) {
		return nil, true, nil
	}
	c := s.chunks[s.i]
	s.i++
	return c, s.i == len(s.chunks), nil
}

// chanSource yields chunks from a channel; closing it ends the body.
type chanSource struct{ ch <-chan []byte }

func (s *chanSource) next(ctx context.Context) ([]byte, bool, error) {
	select {
	case c, ok := <-s.ch:
		if !ok {
			return nil, true, nil
		}
		return c, false, nil
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
}

// readerSource yields one chunk per Read. Reads cannot be interrupted by ctx;
// an http.Response body is, through its request's context.
type readerSource struct {
	r   io.Reader
	buf []byte
}

func (s *readerSource) next(ctx context.Context) ([]byte, bool, error) {
	if s.buf == nil {
		s.buf = make([]byte, 32<<10)
	}
	for {
		n, err := s.r.Read(s.buf)
		c := append([]byte(nil), s.buf[:n]...)
		switch {
		case errors.Is(err, io.EOF):
			return c, true, nil
		case err != nil:
			if ctx.Err() != nil {
				return nil, false, ctx.Err()
			}
			return nil, false, &upstreamReadError{err}
		case n > 0:
			return c, false, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
	}
}

// upstreamReadError is a body that failed mid-way (a reset by the peer).
type upstreamReadError struct{ err error }

func (e *upstreamReadError) Error() string { return fmt.Sprintf("read body: %v", e.err) }
func (e *upstreamReadError) Unwrap() error { return e.err }

// responseSource picks the body of an UpstreamResponse; ok is false when it
// has none.
func responseSource(r *UpstreamResponse) (src bodySource, ok bool) {
	switch {
	case len(r.Body) > 0:
		return &sliceSource{chunks: r.Body}, true
	case r.Stream != nil:
		return &chanSource{ch: r.Stream}, true
	case r.Reader != nil:
		return &readerSource{r: r.Reader}, true
	}
	return nil, false
}
