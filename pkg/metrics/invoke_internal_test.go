package metrics

import (
	"strings"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
)

// Every verdict the executor has fits the kept series (maxVerdicts): a new
// one beyond it would be counted, but looked up in its vector each time.
func TestVerdictsFitKeptSeries(t *testing.T) {
	for v := executor.Verdict(0); v < 4*maxVerdicts; v++ {
		if known := !strings.HasPrefix(v.String(), "verdict("); known && v >= maxVerdicts {
			t.Errorf("verdict %d (%s) is not below maxVerdicts (%d): raise it", int(v), v, maxVerdicts)
		}
	}
}
