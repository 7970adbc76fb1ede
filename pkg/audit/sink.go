package audit

import (
	"context"
	"fmt"
	"io"
	"os"
)

// Sink is where a [Logger] writes events. The Logger calls Write and Close
// from its one goroutine, never concurrently, so a Sink needs no locking;
// a Sink may block (that delays only the Logger's queue, never a request),
// but should return once ctx is done.
type Sink interface {
	// Write records e. It must not keep e or what it refers to after it
	// returns.
	Write(ctx context.Context, e *Event) error
	// Close flushes what the Sink holds and releases it.
	Close(ctx context.Context) error
}

// WriterSink writes one encoded event per line to an io.Writer: stdout, or
// a file [OpenFile] opened for appending. Each event is one Write call of a
// whole line, so lines from one sink never interleave.
type WriterSink struct {
	w     io.Writer
	enc   Encoder
	close func() error
}

// NewWriterSink returns a sink writing to w in format f; p names the
// producer in OCSF events. Close does not close w.
func NewWriterSink(w io.Writer, f Format, p Product) *WriterSink {
	return &WriterSink{w: w, enc: Encoder{Format: f, Product: p}}
}

// OpenFile returns a sink appending to the file at path, created (mode
// 0600: audit lines name users) if it does not exist. Close closes the
// file. Appending lets a log shipper tail the file and logrotate's
// copytruncate rotate it.
func OpenFile(path string, f Format, p Product) (*WriterSink, error) {
	file, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: open %s: %w", path, err)
	}
	s := NewWriterSink(file, f, p)
	s.close = file.Close
	return s, nil
}

// Write encodes e and writes the line. An io.Writer takes no context: a
// writer that blocks (a pipe nobody reads) holds the Logger's goroutine
// until it returns, which the Logger's queue absorbs and its drop count
// records.
func (s *WriterSink) Write(_ context.Context, e *Event) error {
	line, err := s.enc.Encode(e)
	if err != nil {
		return err
	}
	if _, err := s.w.Write(line); err != nil {
		return fmt.Errorf("audit: write event: %w", err)
	}
	return nil
}

// Close closes the file OpenFile opened; for NewWriterSink it does
// nothing.
func (s *WriterSink) Close(context.Context) error {
	if s.close == nil {
		return nil
	}
	if err := s.close(); err != nil {
		return fmt.Errorf("audit: close: %w", err)
	}
	return nil
}
