package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestToolPinning: the defaults, the names of the issue as written, and
// every mistake at its field.
func TestToolPinning(t *testing.T) {
	c, err := Parse([]byte("plugins: []\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Extproc.ToolPinning; p.Enabled() || p.Mode != PinningOff || p.OnChange != PinAlert {
		t.Errorf("default tool_pinning %+v", p)
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "tools.json")
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(good, []byte(`{"version":1,"tools":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(`{"version":1,"tools":{"a":{"description":"not a hash"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	const pre = "plugins: []\nextproc:\n  tool_pinning:\n"
	c, err = Parse([]byte(pre+"    mode: Approved\n    on_change: hide\n    snapshot: "+good+"\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Extproc.ToolPinning; !p.Enabled() || p.Mode != PinningApproved || p.OnChange != PinHide {
		t.Errorf("tool_pinning %+v", p)
	}
	for _, tt := range []struct {
		name, yaml string
		want       []where
	}{
		{"unknown mode", "    mode: strict\n", []where{{"", "extproc.tool_pinning.mode"}}},
		{"unknown on_change", "    mode: record\n    on_change: drop\n", []where{{"", "extproc.tool_pinning.on_change"}}},
		{"approved without snapshot", "    mode: approved\n", []where{{"", "extproc.tool_pinning.snapshot"}}},
		{"snapshot that does not parse", "    mode: approved\n    snapshot: " + bad + "\n", []where{{"", "extproc.tool_pinning.snapshot"}}},
		{"snapshot missing", "    mode: approved\n    snapshot: " + dir + "/none.json\n", []where{{"", "extproc.tool_pinning.snapshot"}}},
		{"ttl zero", "    mode: record\n    ttl: 0\n", []where{{"", "extproc.tool_pinning.ttl"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(pre+tt.yaml), nil)
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("err = %v, want a *ValidationError", err)
			}
			if diff := cmp.Diff(tt.want, problemWheres(ve.Problems)); diff != "" {
				t.Errorf("problems (-want +got):\n%s\n%v", diff, err)
			}
		})
	}
	c, err = Parse([]byte(pre+"    mode: record\n    snapshot: "+good+"\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := wheres(c.Warnings)[where{"", "extproc.tool_pinning.snapshot"}]; !ok {
		t.Errorf("a snapshot with mode record is not warned about: %v", c.Warnings)
	}
}
