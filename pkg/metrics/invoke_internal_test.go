package metrics

import (
	"testing"
	"unsafe"
)

// Two shards of a series never share a cache line.
func TestInvokeShardWholeLines(t *testing.T) {
	if n := unsafe.Sizeof(invokeShard{}); n%64 != 0 {
		t.Errorf("invokeShard is %d bytes, not a whole number of 64-byte lines", n)
	}
}
