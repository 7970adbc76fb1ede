// Package rules evaluates the authorization rules of extproc.rules: CEL
// expressions (the language of Envoy RBAC and Kubernetes admission
// policies) over the MCP request, the caller's identity, the HTTP request
// and the server. A request is refused when any rule's deny expression is
// true; a rule that fails at run time denies too. See docs/rules.md.
//
// Every rule is parsed and type-checked once by [Compile]; a [Set] is then
// evaluated for each request by [Set.Check], and for each item of a list
// result by a [Lister]. A Set is safe for concurrent use; a Lister is not.
package rules

import (
	"fmt"
	"regexp"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"
)

// Rule is one entry of extproc.rules.
type Rule struct {
	// Name identifies the rule in logs, metrics and errors: unique, and
	// matching [NamePattern].
	Name string `yaml:"name" json:"name"`
	// Deny is a CEL expression; the request is refused when it is true.
	Deny string `yaml:"deny" json:"deny"`
	// Message is put in the JSON-RPC error of a refused request ("" gives a
	// generic one).
	Message string `yaml:"message,omitempty" json:"message,omitempty"`
	// Mode is ModeEnforce (the default, "") or ModeShadow: a shadow rule
	// is evaluated like any other, but never refuses a request nor hides
	// a list item; [Set.Check] reports that it would have denied.
	Mode string `yaml:"mode,omitempty" json:"mode,omitempty"`
}

// Values of [Rule.Mode].
const (
	ModeEnforce = "enforce"
	ModeShadow  = "shadow"
)

// Shadow reports whether the rule is in shadow mode.
func (r *Rule) Shadow() bool { return r.Mode == ModeShadow }

// Options change how [Compile] builds a [Set].
type Options struct {
	// CostLimit bounds the run-time cost of one evaluation of one rule, in
	// CEL cost units (about one per variable access, comparison or list
	// element visited; a string operation costs a tenth of its length). A
	// rule that exceeds it is stopped and denies. 0 means
	// [DefaultCostLimit].
	CostLimit uint64
}

// DefaultCostLimit is the cost limit of a rule when Options.CostLimit is
// 0: ample for comparisons and for scanning lists of a few hundred items,
// while an expression that loops over a large argument is cut short within
// tens of microseconds.
const DefaultCostLimit = 10000

// NamePattern is what a rule name must match: safe as a Prometheus label
// value and a log field, without quoting.
var NamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// Issue is one problem of one rule, found by [Compile].
type Issue struct {
	Index int    // the rule's position in the list
	Rule  string // its name, "" when it has none
	Field string // "name" or "deny"
	// Line and Column locate the problem inside the deny expression
	// (1-based; 0: unknown or not about the expression).
	Line, Column int
	Message      string
}

// Error formats i as `rule "admins-delete": 1:14: undeclared reference to
// 'mcp.nme'` (`rules[2]: ...` for a rule without a name).
func (i Issue) Error() string {
	var b strings.Builder
	if i.Rule != "" {
		fmt.Fprintf(&b, "rule %q: ", i.Rule)
	} else {
		fmt.Fprintf(&b, "rules[%d]: ", i.Index)
	}
	if i.Line > 0 {
		fmt.Fprintf(&b, "%d:%d: ", i.Line, i.Column)
	}
	b.WriteString(i.Message)
	return b.String()
}

// Set is a compiled list of rules. A nil *Set has no rules: every method
// works on it and allows everything.
type Set struct {
	rules []compiled
	vars  uint32 // the variables any rule reads
	env   *cel.Env
	empty emptyValues
	// unknownArgs marks mcp.arguments unknown, unknownNameArgs mcp.name
	// too, for a Lister.
	unknownArgs, unknownNameArgs []*interpreter.AttributePattern
	// nameRules is the number of rules that read mcp.name: the most a
	// Lister judges item by item.
	nameRules int
}

// compiled is one rule, ready to run.
type compiled struct {
	rule    *Rule
	prog    cel.Program // plain evaluation
	partial cel.Program // for unknown values; nil unless the rule reads mcp.name or mcp.arguments
	vars    uint32      // the variables it reads, a bit per index of variables
	// guardSet holds the values of mcp.name, mcp.method, identity.tenant
	// and identity.user the rule can deny at all; see guard.
	guardSet
	// nameGuarded: the rule reads mcp.name only in its name guards
	// (nameOnlyInGuards) and is not metered, so it gives the same answer
	// for every name its guards admit. sample is one such name (as a CEL
	// value, made once), nil when the guards admit none.
	nameGuarded bool
	sample      ref.Val
}

// skips reports whether c is false for in without running it.
func (c *compiled) skips(in *Input) bool {
	return !c.method.admits(in.Method) || !c.admitsName(in.Name) || !c.admitsCaller(in)
}

// Len returns the number of rules.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.rules)
}

// Reads reports whether any rule references variable, or a variable under
// it: "mcp.arguments", "request.headers", "identity" (any identity.*).
func (s *Set) Reads(variable string) bool {
	if s == nil {
		return false
	}
	return s.vars&variableMask(variable) != 0
}

// Variables returns the qualified names of the variables rule i (in
// config order) references, in the order of docs/rules.md.
func (s *Set) Variables(i int) []string {
	if s == nil || i < 0 || i >= len(s.rules) {
		return nil
	}
	var names []string
	for v, name := range variables {
		if s.rules[i].vars&bit(v) != 0 {
			names = append(names, name)
		}
	}
	return names
}

// Rule returns rule i, in config order.
func (s *Set) Rule(i int) *Rule {
	if s == nil || i < 0 || i >= len(s.rules) {
		return nil
	}
	return s.rules[i].rule
}
