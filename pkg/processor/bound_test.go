package processor

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

// A boundContext answers as the context it was bound to: the same Done
// channel and deadline, its errors and values, and contexts derived from
// it are cancelled with it directly (no goroutine per derived context).
func TestBoundContext(t *testing.T) {
	type key struct{}
	parent, cancel := context.WithTimeout(context.WithValue(context.Background(), key{}, "v"), time.Hour)
	var b boundContext
	b.bind(parent)
	if b.Done() != parent.Done() {
		t.Error("Done is not the context's channel")
	}
	d, ok := b.Deadline()
	if pd, _ := parent.Deadline(); !ok || !d.Equal(pd) {
		t.Errorf("Deadline = %v, %v; want %v", d, ok, pd)
	}
	if b.Value(key{}) != "v" {
		t.Error("the context's value is lost")
	}
	before := runtime.NumGoroutine()
	child, cancelChild := context.WithCancel(&b)
	defer cancelChild()
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("deriving a context started %d goroutines", n-before)
	}
	cancel()
	select {
	case <-child.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a derived context was not cancelled with the bound one")
	}
	if !errors.Is(b.Err(), context.Canceled) || !errors.Is(child.Err(), context.Canceled) {
		t.Errorf("errors %v, %v", b.Err(), child.Err())
	}
}
