package rules

import (
	"fmt"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"
	"github.com/go-json-experiment/json"
	"google.golang.org/protobuf/types/known/structpb"
)

// Input is what the rules see of one request. Nothing in it is copied: it
// must not change while a rule runs.
type Input struct {
	Method string // mcp.method
	Name   string // mcp.name: the tool or prompt name, the resource URI; "" when none
	// Arguments is params.arguments as raw JSON (nil: none). It is decoded
	// at most once, and only when a rule reads mcp.arguments.
	Arguments []byte
	User      string   // identity.user
	Tenant    string   // identity.tenant
	Roles     []string // identity.roles
	Teams     []string // identity.teams
	// Claims returns the verified JWT payload (identity.claims). It is
	// called at most once, and only when a rule reads identity.claims; nil,
	// or a nil result: none.
	Claims func() *structpb.Struct
	// Headers returns the request headers (request.headers), names in lower
	// case, credentials already removed. It is called at most once, and only
	// when a rule reads request.headers; nil: none.
	Headers  func() map[string]string
	Path     string // request.path
	ServerID string // server.id
}

// emptyValues are the shared values of variables a request lacks.
type emptyValues struct {
	object  ref.Val // an empty map(string, dyn)
	strings ref.Val // an empty map(string, string)
}

func newEmptyValues(env *cel.Env) emptyValues {
	a := env.CELTypeAdapter()
	return emptyValues{
		object:  types.NewStringInterfaceMap(a, map[string]any{}),
		strings: types.NewStringStringMap(a, map[string]string{}),
	}
}

// activation resolves the rule variables of one Input, each at most once,
// and keeps the values for the next rule.
type activation struct {
	set  *Set
	in   *Input
	have uint32 // a bit per variable resolved into vals
	vals [numVariables]ref.Val
}

// ResolveName implements [interpreter.Activation].
func (a *activation) ResolveName(name string) (any, bool) {
	v := variableIndex(name)
	if v < 0 {
		return nil, false
	}
	return a.value(v), true
}

// Parent implements [interpreter.Activation]: there is none.
func (a *activation) Parent() interpreter.Activation { return nil }

// value returns variable v, resolving it the first time.
func (a *activation) value(v int) ref.Val {
	if a.have&bit(v) == 0 {
		a.vals[v] = a.resolve(v)
		a.have |= bit(v)
	}
	return a.vals[v]
}

// set sets variable v to val.
func (a *activation) setValue(v int, val ref.Val) {
	a.vals[v] = val
	a.have |= bit(v)
}

// resolve computes variable v from the Input.
func (a *activation) resolve(v int) ref.Val {
	in, adapter := a.in, a.set.env.CELTypeAdapter()
	switch v {
	case varMethod:
		return types.String(in.Method)
	case varName:
		return types.String(in.Name)
	case varArguments:
		return a.arguments()
	case varUser:
		return types.String(in.User)
	case varTenant:
		return types.String(in.Tenant)
	case varRoles:
		return types.NewStringList(adapter, in.Roles)
	case varTeams:
		return types.NewStringList(adapter, in.Teams)
	case varClaims:
		if in.Claims == nil {
			return a.set.empty.object
		}
		c := in.Claims()
		if c == nil {
			return a.set.empty.object
		}
		return types.NewJSONStruct(adapter, c)
	case varHeaders:
		if in.Headers == nil {
			return a.set.empty.strings
		}
		h := in.Headers()
		if h == nil {
			return a.set.empty.strings
		}
		return types.NewStringStringMap(adapter, h)
	case varPath:
		return types.String(in.Path)
	case varServer:
		return types.String(in.ServerID)
	}
	return types.NewErr("no variable %d", v)
}

// arguments decodes Input.Arguments. JSON null and no arguments are the
// empty map; anything but a JSON object is an error, which makes every rule
// that reads mcp.arguments deny.
func (a *activation) arguments() ref.Val {
	raw := a.in.Arguments
	if len(raw) == 0 {
		return a.set.empty.object
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return types.WrapErr(fmt.Errorf("mcp.arguments: not a JSON object: %w", err))
	}
	if m == nil {
		return a.set.empty.object
	}
	return types.NewStringInterfaceMap(a.set.env.CELTypeAdapter(), m)
}

// partialActivation is an activation with some variables unknown.
type partialActivation struct {
	*activation
	unknown []*interpreter.AttributePattern
}

// AsPartialActivation makes the interpreter find the unknown patterns.
func (p *partialActivation) AsPartialActivation() (interpreter.PartialActivation, bool) {
	return p, true
}

// UnknownAttributePatterns implements [interpreter.PartialActivation].
func (p *partialActivation) UnknownAttributePatterns() []*interpreter.AttributePattern {
	return p.unknown
}
