// Package syncbuf is a bytes.Buffer that goroutines may write while a test
// reads it: the log destination of a server under test.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is an io.Writer whose content can be read at any time. The zero
// value is an empty buffer ready to use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
