package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestBuildInfo(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(BuildInfo("v1.2.3", "abc123", "go1.26.8"))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 1 || mfs[0].GetName() != "mcp_extproc_build_info" || len(mfs[0].GetMetric()) != 1 {
		t.Fatalf("gathered %v, want one mcp_extproc_build_info series", mfs)
	}
	m := mfs[0].GetMetric()[0]
	got := map[string]string{}
	for _, lp := range m.GetLabel() {
		got[lp.GetName()] = lp.GetValue()
	}
	want := map[string]string{"version": "v1.2.3", "commit": "abc123", "goversion": "go1.26.8"}
	if len(got) != len(want) {
		t.Errorf("labels %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("label %s = %q, want %q", k, got[k], v)
		}
	}
	if v := m.GetGauge().GetValue(); v != 1 {
		t.Errorf("value %v, want 1", v)
	}
}
