package metrics_test

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-extproc/mcp-extproc/pkg/attribution/redisstore"
	"github.com/mcp-extproc/mcp-extproc/pkg/metrics"
)

var _ redisstore.Observer = (*metrics.Metrics)(nil)

// TestAttributionStoreMetrics: round trips are timed by op, failed ones
// counted as errors, fallbacks counted by op and reason.
func TestAttributionStoreMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	m.StoreOp("lookup", time.Millisecond, nil)
	m.StoreOp("lookup", time.Millisecond, errors.New("i/o timeout"))
	m.StoreOp("write", 2*time.Millisecond, nil)
	m.StoreFallback("lookup", "error")
	m.StoreFallback("write", "queue_full")
	m.StoreFallback("write", "queue_full")
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range mt.GetLabel() {
				key += " " + l.GetName() + "=" + l.GetValue()
			}
			switch {
			case mt.GetHistogram() != nil:
				got[key] = float64(mt.GetHistogram().GetSampleCount())
			case mt.GetCounter() != nil:
				got[key] = mt.GetCounter().GetValue()
			}
		}
	}
	for key, want := range map[string]float64{
		"mcp_extproc_attribution_store_duration_seconds op=lookup":                 2,
		"mcp_extproc_attribution_store_duration_seconds op=write":                  1,
		"mcp_extproc_attribution_store_errors_total op=lookup":                     1,
		"mcp_extproc_attribution_store_fallbacks_total op=lookup reason=error":     1,
		"mcp_extproc_attribution_store_fallbacks_total op=write reason=queue_full": 2,
	} {
		if got[key] != want {
			t.Errorf("%s = %v, want %v", key, got[key], want)
		}
	}
	if _, ok := got["mcp_extproc_attribution_store_errors_total op=write"]; ok {
		t.Error("a successful write counted as an error")
	}
}
