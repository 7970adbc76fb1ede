package rules

import (
	"maps"
	"slices"
	"strings"

	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
)

// A guard is a necessary condition of a rule read from its expression: a
// top-level conjunct `mcp.name == "x"` or `mcp.name in ["x", "y"]` (and
// the same of mcp.method, identity.tenant and identity.user; a prefix of
// mcp.name is kept beside it, in guardSet). When the request's value is not among the
// guard's, that conjunct is false, and so is the rule, whatever the other
// conjuncts give (CEL's && is false when any side is false, even if
// another side fails): the rule need not run.
type guard struct {
	set    bool     // false: no guard, every value passes
	values []string // the values that pass, when few
	many   map[string]struct{}
}

// fewValues is the most values a guard compares one by one.
const fewValues = 8

// newGuard returns the guard admitting values.
func newGuard(values []string) guard {
	values = slices.Compact(slices.Sorted(slices.Values(values)))
	if len(values) <= fewValues {
		return guard{set: true, values: values}
	}
	g := guard{set: true, many: make(map[string]struct{}, len(values))}
	for _, v := range values {
		g.many[v] = struct{}{}
	}
	return g
}

// admits reports whether value passes g.
func (g *guard) admits(value string) bool {
	switch {
	case !g.set:
		return true
	case g.many != nil:
		_, ok := g.many[value]
		return ok
	}
	for _, v := range g.values {
		if v == value {
			return true
		}
	}
	return false
}

// intersect returns the guard admitting the values both g and h admit.
func (g guard) intersect(h guard) guard {
	if !g.set {
		return h
	}
	var both []string
	for _, v := range h.list() {
		if g.admits(v) {
			both = append(both, v)
		}
	}
	return newGuard(both)
}

// list returns the values g admits (nil when it has no guard).
func (g *guard) list() []string {
	if g.many == nil {
		return g.values
	}
	return slices.Collect(maps.Keys(g.many))
}

// guardSet is what the top-level conjuncts of a rule require of a
// request before the rule can be true: values of mcp.name, mcp.method,
// identity.tenant and identity.user, and prefixes of mcp.name
// (`mcp.name.startsWith("x")`).
type guardSet struct {
	name, method, tenant, user guard
	namePrefixes               []string
}

// guards returns the guards of a checked expression.
func guards(e ast.Expr) guardSet {
	var g guardSet
	for _, c := range conjuncts(e, nil) {
		if p, ok := namePrefixOf(c); ok {
			g.namePrefixes = append(g.namePrefixes, p)
			continue
		}
		v, values := guardOf(c)
		switch v {
		case varName:
			g.name = g.name.intersect(values)
		case varMethod:
			g.method = g.method.intersect(values)
		case varTenant:
			g.tenant = g.tenant.intersect(values)
		case varUser:
			g.user = g.user.intersect(values)
		}
	}
	return g
}

// admitsName reports whether name passes the name guard and prefixes.
func (g *guardSet) admitsName(name string) bool {
	for _, p := range g.namePrefixes {
		if !strings.HasPrefix(name, p) {
			return false
		}
	}
	return g.name.admits(name)
}

// admitsCaller reports whether the caller of in passes the tenant and user
// guards.
func (g *guardSet) admitsCaller(in *Input) bool {
	return g.tenant.admits(in.Tenant) && g.user.admits(in.User)
}

// sampleName returns a name that passes the name guard and prefixes, if
// any does: one of the guard's values, or else the longest prefix.
func (g *guardSet) sampleName() (string, bool) {
	if g.name.set {
		for _, v := range g.name.list() {
			if g.admitsName(v) {
				return v, true
			}
		}
		return "", false
	}
	longest := ""
	for _, p := range g.namePrefixes {
		if len(p) > len(longest) {
			longest = p
		}
	}
	return longest, g.admitsName(longest)
}

// nameOnlyInGuards reports whether expr reads mcp.name, and only as the
// variable of its name guards (top-level conjuncts `mcp.name == "x"`,
// `mcp.name in [...]`, `mcp.name.startsWith("x")`). refs is the checked
// expression's reference map, which has every reference to the variable.
// For a name the guards admit, those conjuncts are true and the rule is the
// conjunction of the others, which do not read the name.
func nameOnlyInGuards(expr ast.Expr, refs map[int64]*ast.ReferenceInfo) bool {
	var guarded []int64 // the ids of the guards' mcp.name
	for _, c := range conjuncts(expr, nil) {
		if id, ok := nameGuardIdent(c); ok {
			guarded = append(guarded, id)
		}
	}
	found := false
	for id, r := range refs {
		if r.Name != variables[varName] {
			continue
		}
		if !slices.Contains(guarded, id) {
			return false
		}
		found = true
	}
	return found
}

// nameGuardIdent returns the id of the mcp.name identifier of a name
// guard conjunct.
func nameGuardIdent(e ast.Expr) (int64, bool) {
	if _, ok := namePrefixOf(e); ok {
		return e.AsCall().Target().ID(), true
	}
	if v, _ := guardOf(e); v != varName {
		return 0, false
	}
	for _, a := range e.AsCall().Args() {
		if w, ok := guardVariable(a); ok && w == varName {
			return a.ID(), true
		}
	}
	return 0, false
}

// namePrefixOf returns the prefix of a conjunct `mcp.name.startsWith("lit")`.
func namePrefixOf(e ast.Expr) (string, bool) {
	if e.Kind() != ast.CallKind {
		return "", false
	}
	call := e.AsCall()
	if !call.IsMemberFunction() || call.FunctionName() != "startsWith" || len(call.Args()) != 1 {
		return "", false
	}
	if v, ok := guardVariable(call.Target()); !ok || v != varName {
		return "", false
	}
	return stringLiteral(call.Args()[0])
}

// conjuncts appends the operands of the top-level && of e (e itself when it
// is not a conjunction) to out.
func conjuncts(e ast.Expr, out []ast.Expr) []ast.Expr {
	if e.Kind() == ast.CallKind && e.AsCall().FunctionName() == operators.LogicalAnd {
		for _, a := range e.AsCall().Args() {
			out = conjuncts(a, out)
		}
		return out
	}
	return append(out, e)
}

// guardOf returns the variable and values of a guard conjunct
// (`var == "lit"`, `"lit" == var`, `var in ["lit", ...]`), or -1.
func guardOf(e ast.Expr) (int, guard) {
	if e.Kind() != ast.CallKind {
		return -1, guard{}
	}
	call := e.AsCall()
	args := call.Args()
	if len(args) != 2 || call.IsMemberFunction() {
		return -1, guard{}
	}
	switch call.FunctionName() {
	case operators.Equals:
		if v, ok := guardVariable(args[0]); ok {
			if s, ok := stringLiteral(args[1]); ok {
				return v, newGuard([]string{s})
			}
		}
		if v, ok := guardVariable(args[1]); ok {
			if s, ok := stringLiteral(args[0]); ok {
				return v, newGuard([]string{s})
			}
		}
	case operators.In:
		v, ok := guardVariable(args[0])
		if !ok || args[1].Kind() != ast.ListKind || len(args[1].AsList().OptionalIndices()) > 0 {
			return -1, guard{}
		}
		var values []string
		for _, el := range args[1].AsList().Elements() {
			s, ok := stringLiteral(el)
			if !ok {
				return -1, guard{}
			}
			values = append(values, s)
		}
		return v, newGuard(values)
	}
	return -1, guard{}
}

// guardVariable reports whether e is a string variable a guard may read
// (mcp.name, mcp.method, identity.tenant, identity.user: never missing,
// "" when unknown), and which.
func guardVariable(e ast.Expr) (int, bool) {
	if e.Kind() != ast.IdentKind {
		return -1, false
	}
	switch v := variableIndex(e.AsIdent()); v {
	case varName, varMethod, varTenant, varUser:
		return v, true
	}
	return -1, false
}

func stringLiteral(e ast.Expr) (string, bool) {
	if e.Kind() != ast.LiteralKind {
		return "", false
	}
	s, ok := e.AsLiteral().(types.String)
	return string(s), ok
}

// linearFunction reports whether a function's run time is at most linear
// in the size of its operands and its result no larger than them (or than
// the concatenation of two): an expression made of these alone, without a
// comprehension, runs in time bounded by its size times the request's, so
// it is not metered.
func linearFunction(name string) bool {
	switch name {
	case operators.LogicalAnd, operators.LogicalOr, operators.LogicalNot, operators.Conditional,
		operators.Equals, operators.NotEquals,
		operators.Less, operators.LessEquals, operators.Greater, operators.GreaterEquals,
		operators.Add, operators.Subtract, operators.Multiply, operators.Divide, operators.Modulo,
		operators.Negate, operators.Index, operators.OptIndex, operators.OptSelect, operators.In,
		"size", "startsWith", "endsWith", "contains",
		"int", "uint", "double", "string", "bool", "type", "dyn",
		"or", "orValue", "hasValue", "value", "optional.of", "optional.ofNonZeroValue", "optional.none",
		"lowerAscii", "upperAscii", "trim", "indexOf", "lastIndexOf", "charAt",
		"substring", "split", "join", "reverse", "strings.quote":
		return true
	}
	return false
}

// metered reports whether an expression needs the cost limit: it has a
// comprehension (exists, all, map, filter, ...), calls a function not in
// linearFunction, or matches a pattern that is not a literal (a pattern
// from the request would be compiled at run time).
func metered(e ast.Expr) bool {
	found := false
	ast.PreOrderVisit(e, ast.NewExprVisitor(func(e ast.Expr) {
		switch e.Kind() {
		case ast.ComprehensionKind:
			found = true
		case ast.CallKind:
			call := e.AsCall()
			switch name := call.FunctionName(); {
			case name == "matches":
				args := call.Args()
				if len(args) == 0 || args[len(args)-1].Kind() != ast.LiteralKind {
					found = true
				}
			case !linearFunction(name):
				found = true
			}
		}
	}))
	return found
}
