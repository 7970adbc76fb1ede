package toolpin

import (
	"context"
	"fmt"
)

// Mode is extproc.tool_pinning.mode.
type Mode string

// The modes.
const (
	Off      Mode = "off"      // nothing pinned
	Record   Mode = "record"   // the first definition seen is pinned
	Approved Mode = "approved" // only the snapshot's definitions are approved
)

// OnChange is extproc.tool_pinning.on_change: what a changed definition
// costs.
type OnChange string

// The policies.
const (
	Alert OnChange = "alert" // log, metric; the list and calls unchanged
	Hide  OnChange = "hide"  // dropped from lists, its calls refused
	Block OnChange = "block" // the whole list refused, its calls refused
)

// Pinner applies one configuration's pinning. It is safe for concurrent
// use; the Store holds the state.
type Pinner struct {
	mode     Mode
	onChange OnChange
	snapshot *Snapshot
	store    Store
}

// New returns the Pinner of a configuration, or nil for mode off. Mode
// approved needs a snapshot; record a store.
func New(mode Mode, onChange OnChange, snapshot *Snapshot, store Store) (*Pinner, error) {
	switch mode {
	case "", Off:
		return nil, nil
	case Record, Approved:
	default:
		return nil, fmt.Errorf("tool pinning: unknown mode %q (off, record, approved)", mode)
	}
	switch onChange {
	case "":
		onChange = Alert
	case Alert, Hide, Block:
	default:
		return nil, fmt.Errorf("tool pinning: unknown on_change %q (alert, hide, block)", onChange)
	}
	if mode == Approved && snapshot == nil {
		return nil, fmt.Errorf("tool pinning: mode approved needs a snapshot")
	}
	if store == nil {
		return nil, fmt.Errorf("tool pinning: no store")
	}
	return &Pinner{mode: mode, onChange: onChange, snapshot: snapshot, store: store}, nil
}

// OnChange returns what a change costs.
func (p *Pinner) OnChange() OnChange { return p.onChange }

// unreadable is the member of the change of a definition Of cannot read.
const unreadable = "(unreadable)"

// Check fingerprints the items of one list of kind k from the MCP server
// scope (each a JSON object as the list holds it) against the pins, pins
// what record mode pins, notes the outcome for the calls that follow, and
// returns the changes found, by item index.
func (p *Pinner) Check(ctx context.Context, scope string, k Kind, items [][]byte) (map[int]Change, error) {
	var changes map[int]Change
	add := func(i int, name string, members []string) {
		if changes == nil {
			changes = map[int]Change{}
		}
		changes[i] = Change{Kind: k, Name: name, Members: members}
	}
	fps := make([]Item, 0, len(items))
	index := make([]int, 0, len(items))
	for i, raw := range items {
		name, fp, err := Of(k, raw)
		if err != nil {
			add(i, name, []string{unreadable})
			continue
		}
		fps = append(fps, Item{Name: name, FP: fp})
		index = append(index, i)
	}
	switch p.mode {
	case Approved:
		for j, it := range fps {
			approved, ok := p.snapshot.Lookup(k, it.Name)
			switch {
			case !ok:
				add(index[j], it.Name, []string{NotApproved})
			case !approved.Equal(it.FP):
				add(index[j], it.Name, approved.Diff(it.FP))
			}
		}
	case Record:
		pinned, err := p.store.Pin(ctx, scope, k, fps)
		if err != nil {
			return nil, err
		}
		for j, it := range fps {
			if pinned[j] != nil && !pinned[j].Equal(it.FP) {
				add(index[j], it.Name, pinned[j].Diff(it.FP))
			}
		}
	}
	// What the calls that follow see: the readable definitions, each
	// changed or not (an unreadable one has no name to call it by).
	seen := make([]string, len(fps))
	changed := map[string][]string{}
	for j, it := range fps {
		seen[j] = it.Name
		if c, ok := changes[index[j]]; ok {
			changed[it.Name] = c.Members
		}
	}
	if err := p.store.Mark(ctx, scope, k, seen, changed); err != nil {
		return changes, err
	}
	return changes, nil
}

// CallChange returns the change of the definition a call uses (a tool's
// for tools/call, a prompt's for prompts/get), when calls of changed
// definitions are refused (on_change hide or block) and it changed: in
// mode approved, one the snapshot does not hold at all; else what the
// last list showed.
func (p *Pinner) CallChange(ctx context.Context, scope string, k Kind, name string) (*Change, error) {
	if p.onChange == Alert {
		return nil, nil
	}
	if p.mode == Approved {
		if _, ok := p.snapshot.Lookup(k, name); !ok {
			return &Change{Kind: k, Name: name, Members: []string{NotApproved}}, nil
		}
	}
	members, err := p.store.Changed(ctx, scope, k, name)
	if err != nil || len(members) == 0 {
		return nil, err
	}
	return &Change{Kind: k, Name: name, Members: members}, nil
}
