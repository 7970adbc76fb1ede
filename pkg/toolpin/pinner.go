package toolpin

import (
	"context"
	"fmt"
	"time"

	"github.com/mcp-extproc/mcp-extproc/pkg/mcplist"
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
//
// A Pinner remembers what it learnt, so that a server listing the same
// definitions again costs little (docs/tool-pinning.md, "What a Pinner
// remembers"): the fingerprint of each definition and the definitions of
// each list result, by their exact bytes (pure functions, bounded by
// DefaultCacheBytes), and, for each definition, that the store answered
// its pin was that fingerprint, for at most MaxPinMemo and half the
// store's TTL. Store pins are never replaced while they live (the
// first wins) and a pin lives its TTL after the last Pin that saw it, so
// that answer holds for the memo's life; a definition whose bytes differ
// is always asked about, and what the calls see (Mark, Changed) always
// goes to the store.
type Pinner struct {
	mode     Mode
	onChange OnChange
	snapshot *Snapshot
	store    Store

	fps   *fpCache         // fingerprints by definition bytes
	lists *listCache       // resolved definitions by list result bytes
	memo  time.Duration    // how long a store's agreement is trusted; 0: not at all
	now   func() time.Time // the clock of memo
}

// ttlStore is implemented by the stores of this package: how long a pin
// lives after a Pin last saw it. A Pinner trusts no other store's answers
// beyond one list.
type ttlStore interface {
	pinTTL() time.Duration
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
	p := &Pinner{mode: mode, onChange: onChange, snapshot: snapshot, store: store, now: time.Now,
		fps: newFPCache(DefaultCacheBytes / 2), lists: newListCache(DefaultCacheBytes / 2)}
	if s, ok := store.(ttlStore); ok {
		p.memo = min(MaxPinMemo, s.pinTTL()/2)
	}
	return p, nil
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
	r := p.resolve(k, items)
	return p.check(ctx, scope, &r)
}

// CheckResult is [Pinner.Check] of the items of result, the result of a
// list l (a tools/list, prompts/list or resources/templates/list; another
// list is not checked). A result seen before, byte for byte, is not read
// again: its definitions are remembered (bounded by DefaultCacheBytes).
// A result that is not a list of l's shape is not checked either (nil,
// nil): l's own filter refuses it.
func (p *Pinner) CheckResult(ctx context.Context, scope string, l *mcplist.List, result []byte) (map[int]Change, error) {
	k, ok := KindOfList(l.Method)
	if !ok {
		return nil, nil
	}
	r, ok := p.lists.lookup(k, result)
	if !ok {
		var items [][]byte
		if _, _, err := l.FilterItems(result, func(_ string, item []byte) bool {
			items = append(items, item)
			return false
		}); err != nil {
			return nil, nil
		}
		res := p.resolve(k, items)
		r = &res
		p.lists.store(result, r)
	}
	return p.check(ctx, scope, r)
}

// resolve returns the definitions of items, of kind k.
func (p *Pinner) resolve(k Kind, items [][]byte) resolved {
	r := resolved{kind: k, listed: make([]listedItem, 0, len(items))}
	p.fps.each(k, items, func(i int, e *fpEntry, err error) {
		if err != nil {
			r.unreadable = append(r.unreadable, i)
			return
		}
		r.listed = append(r.listed, listedItem{i: i, e: e})
	})
	return r
}

// check is Check of the resolved definitions of a list.
func (p *Pinner) check(ctx context.Context, scope string, r *resolved) (map[int]Change, error) {
	k := r.kind
	var changes map[int]Change
	add := func(i int, name string, members []string) {
		if changes == nil {
			changes = map[int]Change{}
		}
		changes[i] = Change{Kind: k, Name: name, Members: members}
	}
	for _, i := range r.unreadable {
		add(i, "", []string{unreadable})
	}
	switch p.mode {
	case Approved:
		for _, l := range r.listed {
			if l.e.approved.Load() {
				continue
			}
			approved, ok := p.snapshot.Lookup(k, l.e.name)
			switch {
			case !ok:
				add(l.i, l.e.name, []string{NotApproved})
			case !approved.Equal(l.e.fp):
				add(l.i, l.e.name, approved.Diff(l.e.fp))
			default:
				l.e.approved.Store(true)
			}
		}
	case Record:
		if err := p.pin(ctx, scope, k, r.listed, add); err != nil {
			return nil, err
		}
	}
	// What the calls that follow see: the readable definitions, each
	// changed or not (an unreadable one has no name to call it by).
	seen := make([]string, len(r.listed))
	var changed map[string][]string
	for j, l := range r.listed {
		seen[j] = l.e.name
		if c, ok := changes[l.i]; ok {
			if changed == nil {
				changed = map[string][]string{}
			}
			changed[l.e.name] = c.Members
		}
	}
	if err := p.store.Mark(ctx, scope, k, seen, changed); err != nil {
		return changes, err
	}
	return changes, nil
}

// pin checks the listed definitions against the store's pins (pinning
// those it has none of) and adds the changes found. A definition the
// store agreed with in scope within the memo's life is not asked about
// again; the others are, in one Store.Pin.
func (p *Pinner) pin(ctx context.Context, scope string, k Kind, listed []listedItem, add func(int, string, []string)) error {
	var now time.Time
	if p.memo > 0 {
		now = p.now()
	}
	var ask []Item
	var askAt []int // ask[n] is listed[askAt[n]]
	for j, l := range listed {
		if p.memo > 0 && l.e.agrees(scope, now) {
			continue
		}
		if ask == nil {
			ask, askAt = make([]Item, 0, len(listed)-j), make([]int, 0, len(listed)-j)
		}
		ask = append(ask, Item{Name: l.e.name, FP: l.e.fp})
		askAt = append(askAt, j)
	}
	if len(ask) == 0 {
		return nil
	}
	pinned, err := p.store.Pin(ctx, scope, k, ask)
	if err != nil {
		return err
	}
	var agreed *agreement
	if p.memo > 0 {
		agreed = &agreement{scope: scope, until: now.Add(p.memo)}
	}
	for n, j := range askAt {
		l := listed[j]
		switch {
		case pinned[n] == nil: // the store had no room: not pinned
		case pinned[n].Equal(l.e.fp):
			if agreed != nil {
				l.e.pinned.Store(agreed)
			}
		default:
			add(l.i, l.e.name, pinned[n].Diff(l.e.fp))
		}
	}
	return nil
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
