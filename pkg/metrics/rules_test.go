package metrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-extproc/mcp-extproc/pkg/metrics"
)

// TestListReads: each list answer read is counted once, by where its
// parse came from.
func TestListReads(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	for _, from := range []string{"scan", "memo", "memo"} {
		m.ListRead(from)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "mcp_extproc_list_answers_read_total" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				got[l.GetName()+"="+l.GetValue()] = mt.GetCounter().GetValue()
			}
		}
	}
	if want := map[string]float64{"from=memo": 2, "from=scan": 1}; len(got) != len(want) || got["from=memo"] != 2 || got["from=scan"] != 1 {
		t.Errorf("mcp_extproc_list_answers_read_total = %v, want %v", got, want)
	}
}
