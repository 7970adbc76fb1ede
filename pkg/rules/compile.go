package rules

import (
	"fmt"
	"slices"
	"strings"
	"unicode"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/ext"
	"cel.dev/cel-go/interpreter"
)

// The variables a rule can read, by index (a bit of compiled.vars each).
const (
	varMethod = iota
	varName
	varArguments
	varUser
	varTenant
	varRoles
	varTeams
	varClaims
	varHeaders
	varPath
	varServer
	numVariables
)

// variables are the qualified names of the variables, by index.
var variables = [numVariables]string{
	varMethod:    "mcp.method",
	varName:      "mcp.name",
	varArguments: "mcp.arguments",
	varUser:      "identity.user",
	varTenant:    "identity.tenant",
	varRoles:     "identity.roles",
	varTeams:     "identity.teams",
	varClaims:    "identity.claims",
	varHeaders:   "request.headers",
	varPath:      "request.path",
	varServer:    "server.id",
}

// variableIndex returns the index of the variable named name, or -1.
func variableIndex(name string) int {
	switch name {
	case "mcp.method":
		return varMethod
	case "mcp.name":
		return varName
	case "mcp.arguments":
		return varArguments
	case "identity.user":
		return varUser
	case "identity.tenant":
		return varTenant
	case "identity.roles":
		return varRoles
	case "identity.teams":
		return varTeams
	case "identity.claims":
		return varClaims
	case "request.headers":
		return varHeaders
	case "request.path":
		return varPath
	case "server.id":
		return varServer
	}
	return -1
}

// variableType returns the CEL type of variable v.
func variableType(v int) *cel.Type {
	switch v {
	case varArguments, varClaims:
		return cel.MapType(cel.StringType, cel.DynType)
	case varRoles, varTeams:
		return cel.ListType(cel.StringType)
	case varHeaders:
		return cel.MapType(cel.StringType, cel.StringType)
	}
	return cel.StringType
}

// bit returns the mask of variable v.
func bit(v int) uint32 { return 1 << v }

// variableMask returns the mask of the variables named prefix or under it
// ("identity" → every identity.*).
func variableMask(prefix string) uint32 {
	var m uint32
	for v, name := range variables {
		if name == prefix || strings.HasPrefix(name, prefix+".") {
			m |= bit(v)
		}
	}
	return m
}

// newEnv returns the CEL environment of the rules: their variables, the
// string, list and set extensions, optional values (m.?key), and numeric
// comparisons across int, uint and double (JSON numbers are doubles).
func newEnv() (*cel.Env, error) {
	opts := []cel.EnvOption{
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		ext.Strings(),
		ext.Lists(),
		ext.Sets(),
	}
	for v, name := range variables {
		opts = append(opts, cel.Variable(name, variableType(v)))
	}
	return cel.NewEnv(opts...)
}

// Compile parses and type-checks every rule of rs and prepares it to run.
// It returns the issues of every bad rule (an empty or invalid name, a name
// given twice, a missing deny, an expression that does not compile or is
// not a bool), and then no Set: a list with a bad rule is refused whole, as
// dropping a deny rule would allow what it refuses. No rules give a nil Set.
func Compile(rs []Rule, o Options) (*Set, []Issue) {
	if len(rs) == 0 {
		return nil, nil
	}
	env, err := newEnv()
	if err != nil {
		return nil, []Issue{{Field: "deny", Message: fmt.Sprintf("building the CEL environment: %v", err)}}
	}
	limit := o.CostLimit
	if limit == 0 {
		limit = DefaultCostLimit
	}
	s := &Set{
		env:         env,
		rules:       make([]compiled, len(rs)),
		unknownArgs: []*interpreter.AttributePattern{interpreter.NewAttributePattern(variables[varArguments])},
		unknownNameArgs: []*interpreter.AttributePattern{
			interpreter.NewAttributePattern(variables[varName]),
			interpreter.NewAttributePattern(variables[varArguments]),
		},
		empty: newEmptyValues(env),
	}
	list := slices.Clone(rs)
	seen := map[string]int{}
	var issues []Issue
	for i := range list {
		r := &list[i]
		issues = append(issues, checkName(i, r, seen)...)
		if r.Mode != "" && r.Mode != ModeEnforce && r.Mode != ModeShadow {
			issues = append(issues, Issue{Index: i, Rule: r.Name, Field: "mode",
				Message: fmt.Sprintf("must be %q (the default) or %q, not %q", ModeEnforce, ModeShadow, r.Mode)})
		}
		c, is := compileRule(env, i, r, limit)
		issues = append(issues, is...)
		s.rules[i] = c
		s.vars |= c.vars
		if c.vars&bit(varName) != 0 {
			s.nameRules++
		}
	}
	if len(issues) > 0 {
		return nil, issues
	}
	return s, nil
}

// checkName returns the issues of rule i's name; seen maps the lower-cased
// names met so far to their index.
func checkName(i int, r *Rule, seen map[string]int) []Issue {
	issue := func(format string, args ...any) []Issue {
		return []Issue{{Index: i, Rule: r.Name, Field: "name", Message: fmt.Sprintf(format, args...)}}
	}
	switch {
	case r.Name == "":
		return issue("required: a name for logs and metrics, e.g. admins-delete")
	case !NamePattern.MatchString(r.Name):
		return issue("must be 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit")
	}
	key := strings.ToLower(r.Name)
	if j, dup := seen[key]; dup {
		return issue("duplicate: rules[%d] has the same name (names are compared ignoring case)", j)
	}
	seen[key] = i
	return nil
}

// compileRule compiles rule i.
func compileRule(env *cel.Env, i int, r *Rule, limit uint64) (compiled, []Issue) {
	c := compiled{rule: r}
	if strings.TrimSpace(r.Deny) == "" {
		return c, []Issue{{Index: i, Rule: r.Name, Field: "deny", Message: "required: a CEL expression that is true when the request must be refused"}}
	}
	ast, iss := env.Compile(r.Deny)
	if iss.Err() != nil {
		var issues []Issue
		for _, e := range iss.Errors() {
			is := Issue{Index: i, Rule: r.Name, Field: "deny", Message: strings.TrimSuffix(e.Message, " (in container '')")}
			if e.Location != nil && e.Location.Line() > 0 {
				is.Line, is.Column = e.Location.Line(), e.Location.Column()+1
				is.Message = explainUndeclared(is.Message, r.Deny, is.Line, is.Column)
			}
			issues = append(issues, is)
		}
		return c, issues
	}
	if t := ast.OutputType(); !t.IsExactType(types.BoolType) && !t.IsExactType(types.DynType) {
		return c, []Issue{{Index: i, Rule: r.Name, Field: "deny", Message: fmt.Sprintf("must be a bool expression, got %s", t)}}
	}
	for _, ref := range ast.NativeRep().ReferenceMap() {
		if v := variableIndex(ref.Name); v >= 0 {
			c.vars |= bit(v)
		}
	}
	expr := ast.NativeRep().Expr()
	c.guardSet = guards(expr)
	var opts []cel.ProgramOption
	meter := metered(expr)
	if meter {
		opts = append(opts, cel.CostLimit(limit))
	}
	// Without a cost limit, a rule that reads mcp.name only in its guards
	// is the same for every name they admit: its other conjuncts decide.
	// (With one, the guards' own cost, which grows with the name, could
	// stop it for one name and not for another.)
	if !meter && nameOnlyInGuards(expr, ast.NativeRep().ReferenceMap()) {
		c.nameGuarded = true
		if name, ok := c.sampleName(); ok {
			c.sample = types.String(name)
		}
	}
	var err error
	c.prog, err = env.Program(ast, append(opts, cel.EvalOptions(cel.OptOptimize))...)
	if err == nil && c.vars&(bit(varArguments)|bit(varName)) != 0 {
		c.partial, err = env.Program(ast, append(opts, cel.EvalOptions(cel.OptOptimize, cel.OptPartialEval))...)
	}
	if err != nil {
		return c, []Issue{{Index: i, Rule: r.Name, Field: "deny", Message: fmt.Sprintf("preparing the program: %v", err)}}
	}
	return c, nil
}

// explainUndeclared rewrites CEL's message about an undeclared root of a
// qualified variable ("undeclared reference to 'mcp' (did you mean
// 'map'?)", for mcp.x) to name the whole reference at line:column of expr
// and the variables under that root.
func explainUndeclared(msg, expr string, line, column int) string {
	const prefix = "undeclared reference to '"
	rest, ok := strings.CutPrefix(msg, prefix)
	if !ok {
		return msg
	}
	root, _, _ := strings.Cut(rest, "'")
	var under []string
	for _, name := range variables {
		if strings.HasPrefix(name, root+".") {
			under = append(under, name)
		}
	}
	if len(under) == 0 {
		return msg
	}
	return fmt.Sprintf("%s%s': the variables under %s are %s", prefix, referenceAt(expr, line, column), root, strings.Join(under, ", "))
}

// referenceAt returns the dotted name that starts at line:column (1-based,
// in characters) of expr.
func referenceAt(expr string, line, column int) string {
	lines := strings.Split(expr, "\n")
	if line > len(lines) {
		return ""
	}
	text := []rune(lines[line-1])
	if column < 1 || column > len(text) {
		return ""
	}
	end := column - 1
	for end < len(text) && (text[end] == '.' || text[end] == '_' || unicode.IsLetter(text[end]) || unicode.IsDigit(text[end])) {
		end++
	}
	return string(text[column-1 : end])
}
