package rules

import (
	"cel.dev/cel-go/common/types"
)

// Lister tells which items of a list result to hide: an item is hidden
// when a rule denies the call that would use it (tools/call of a tool
// listed by tools/list, and so on), with mcp.arguments unknown. A rule
// whose answer depends on the arguments does not hide the item; the call
// itself is still checked. A rule that fails hides the item, as the call
// would be denied too. A Lister is not safe for concurrent use.
type Lister struct {
	in  Input
	act activation
	// argsUnknown has mcp.arguments unknown; anyUnknown mcp.name too.
	argsUnknown, anyUnknown partialActivation
	// perItem are the rules whose answer depends on mcp.name, in order, up
	// to always.
	perItem []itemRule
	// always is the first rule that denies whatever the name; nil: none.
	always *Rule
}

// itemRule is a rule a Lister judges item by item.
type itemRule struct {
	c *compiled
	// verdict is, for a name-guarded rule, its answer for every item its
	// guards admit, once the first such item judged it.
	verdict verdict
}

// verdict is what a name-guarded rule gives the items its guards admit.
type verdict uint8

const (
	unjudged verdict = iota
	hidesAll
	hidesNone
)

// Lister returns a Lister for the items of one list result. in.Method is
// the method of the call the items are for (tools/call, prompts/get,
// resources/read); in.Name and in.Arguments are ignored. Every rule is
// first evaluated here once with mcp.name unknown: a rule that is true or
// false whatever the name is decided for all items at once.
func (s *Set) Lister(in *Input) *Lister {
	if s == nil || len(s.rules) == 0 {
		return nil
	}
	l := s.newLister(in)
	if s.nameRules > 0 {
		l.perItem = make([]itemRule, 0, s.nameRules)
	}
	for i := range s.rules {
		c := &s.rules[i]
		if c.rule.Shadow() || !c.method.admits(in.Method) || !c.admitsCaller(in) {
			continue // a shadow rule hides nothing
		}
		if c.vars&bit(varName) == 0 {
			if l.hides(c) {
				l.always = c.rule
				break
			}
			continue
		}
		if c.nameGuarded {
			// Judged at the first item its guards admit, if any: it is
			// false for every other (so never "always").
			if c.sample != nil {
				l.perItem = append(l.perItem, itemRule{c: c})
			}
			continue
		}
		out, _, err := c.partial.Eval(&l.anyUnknown)
		switch {
		case err == nil && out == types.True:
			l.always = c.rule
		case err == nil && out == types.False:
			continue
		default: // unknown, or an error that the name may avoid
			l.perItem = append(l.perItem, itemRule{c: c})
			continue
		}
		break
	}
	return l
}

// newLister returns a Lister for in's caller and call method, with no rule
// judged yet.
func (s *Set) newLister(in *Input) *Lister {
	l := &Lister{in: *in}
	l.in.Name, l.in.Arguments = "", nil
	l.act = activation{set: s, in: &l.in}
	l.argsUnknown = partialActivation{&l.act, s.unknownArgs}
	l.anyUnknown = partialActivation{&l.act, s.unknownNameArgs}
	return l
}

// Hidden reports whether the item called name is hidden, and by which rule
// (the first, in config order).
func (l *Lister) Hidden(name string) (rule *Rule, hidden bool) {
	if l == nil {
		return nil, false
	}
	named := false
	for k := range l.perItem {
		r := &l.perItem[k]
		c := r.c
		if !c.admitsName(name) {
			continue
		}
		switch r.verdict {
		case hidesAll:
			return c.rule, true
		case hidesNone:
			continue
		}
		if !named {
			l.act.setValue(varName, types.String(name))
			named = true
		}
		hidden := l.hides(c)
		if c.nameGuarded {
			r.verdict = hidesNone
			if hidden {
				r.verdict = hidesAll
			}
		}
		if hidden {
			return c.rule, true
		}
	}
	return l.always, l.always != nil
}

// hides evaluates c for the current item, with mcp.arguments unknown.
func (l *Lister) hides(c *compiled) bool {
	if c.vars&bit(varArguments) == 0 {
		out, _, err := c.prog.Eval(&l.act)
		deny, _ := denies(out, err)
		return deny
	}
	out, _, err := c.partial.Eval(&l.argsUnknown)
	if err == nil && types.IsUnknown(out) {
		return false
	}
	deny, _ := denies(out, err)
	return deny
}

// MayHide reports whether the rules may hide any item of a list whose
// items are used through in.Method (tools/call for tools/list, ...) from
// this caller; in.Name and in.Arguments are ignored. It is false when every
// rule is false for the caller whatever the item, so the list's answer
// need not be read. A rule guarded by mcp.name ("== x", "in [...]") is
// judged for each name it admits, as the Lister would judge that item;
// any other rule that reads mcp.name may hide unless it is false with the
// name unknown. It stops at the first rule that may hide.
func (s *Set) MayHide(in *Input) bool {
	if s == nil || len(s.rules) == 0 {
		return false
	}
	l := s.newLister(in)
	for i := range s.rules {
		if c := &s.rules[i]; !c.rule.Shadow() && c.method.admits(in.Method) && c.admitsCaller(in) && l.mayHide(c) {
			return true
		}
	}
	return false
}

// mayHide reports whether c may hide an item from the Lister's caller.
func (l *Lister) mayHide(c *compiled) bool {
	switch {
	case c.vars&bit(varName) == 0:
		return l.hides(c)
	case c.nameGuarded:
		// The same for every name the guards admit: one of them tells.
		if c.sample == nil {
			return false
		}
		l.act.setValue(varName, c.sample)
		return l.hides(c)
	case c.name.set && len(c.name.list()) <= fewValues:
		for _, name := range c.name.list() {
			l.act.setValue(varName, types.String(name))
			if l.hides(c) {
				return true
			}
		}
		return false
	}
	out, _, err := c.partial.Eval(&l.anyUnknown)
	return err != nil || out != types.False
}
