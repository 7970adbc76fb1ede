package config

import (
	"github.com/mcp-extproc/mcp-extproc/pkg/toolpin"
)

// ToolPinning is extproc.tool_pinning: the definitions MCP servers
// advertise (tools, prompts, resource templates) are fingerprinted and
// pinned, so that one that changes after it was approved is noticed
// (docs/tool-pinning.md).
type ToolPinning struct {
	// Mode is "off" (default), "record" (the first definition seen is
	// pinned) or "approved" (only Snapshot's definitions are).
	Mode string `yaml:"mode,omitempty" json:"mode,omitempty" default:"off"`
	// OnChange is "alert" (default: log and metric), "hide" (the
	// definition is dropped from lists and its calls refused) or "block"
	// (the whole list refused, its calls too).
	OnChange string `yaml:"on_change,omitempty" json:"on_change,omitempty" default:"alert"`
	// Snapshot is the approved definitions' file (`extproc tools
	// snapshot`), required with mode approved.
	Snapshot string `yaml:"snapshot,omitempty" json:"snapshot,omitempty" default:"none; required with mode approved"`
	// TTL is how long a pin is kept after a list last showed it (default
	// 7 days), in the attribution store's backend (memory or Redis).
	TTL *Seconds `yaml:"ttl,omitempty" json:"ttl,omitempty" default:"604800 (7 days)"`
}

// Values of ToolPinning.Mode and OnChange.
const (
	PinningOff      = string(toolpin.Off)
	PinningRecord   = string(toolpin.Record)
	PinningApproved = string(toolpin.Approved)
	PinAlert        = string(toolpin.Alert)
	PinHide         = string(toolpin.Hide)
	PinBlock        = string(toolpin.Block)
)

// Enabled reports whether definitions are pinned.
func (p *ToolPinning) Enabled() bool { return p.Mode != "" && p.Mode != PinningOff }

// choices lists the section's one-of-a-few-words settings.
func (p *ToolPinning) choices(at string) []choice {
	return []choice{
		{joinPath(at, "mode"), &p.Mode, []string{PinningOff, PinningRecord, PinningApproved}},
		{joinPath(at, "on_change"), &p.OnChange, []string{PinAlert, PinHide, PinBlock}},
	}
}

// setDefaults sets mode (off) and on_change (alert).
func (p *ToolPinning) setDefaults(*Config) {
	for _, ch := range p.choices("") {
		ch.setDefault()
	}
}

// check checks extproc.tool_pinning (after defaults): mode approved needs
// a snapshot that parses; a snapshot with another mode is ignored.
func (p *ToolPinning) check(v *validator, _ *Config, base string) {
	v.choices(p.choices(base)...)
	if p.TTL != nil && p.TTL.Duration <= 0 {
		v.problem("", base+".ttl", "must be positive")
	}
	switch {
	case p.Mode == PinningApproved && p.Snapshot == "":
		v.problem("", base+".snapshot", "required with mode: approved (write one with `extproc tools snapshot --url ...`)")
	case p.Mode != PinningApproved && p.Snapshot != "":
		v.warn("", base+".snapshot", "ignored: mode is %q (set mode: approved to use it)", p.Mode)
	case p.Snapshot != "" && !v.opts.SkipFiles:
		if _, err := toolpin.LoadSnapshot(p.Snapshot); err != nil {
			v.problem("", base+".snapshot", "%v", err)
		}
	}
}
