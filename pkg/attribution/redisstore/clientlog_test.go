package redisstore

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// TestClientLog: a go-redis log line becomes one warn line of ours.
func TestClientLog(t *testing.T) {
	var buf bytes.Buffer
	clientLog{zerolog.New(&buf)}.Printf(bg, "redis: failed to dial after %d attempts", 1)
	if got := buf.String(); !strings.Contains(got, `"level":"warn"`) || !strings.Contains(got, "failed to dial after 1 attempts") {
		t.Errorf("logged %q", got)
	}
}
