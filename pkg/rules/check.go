package rules

import (
	"errors"
	"fmt"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
)

// Result is the outcome of [Set.Check].
type Result struct {
	// Rule is the first rule, in config order, that denied; nil: allowed.
	Rule *Rule
	// Err is set when that rule failed at run time (and so denied): a
	// missing key, a result that is not a bool, the cost limit.
	Err error
	// WouldDeny are the shadow rules, in config order up to Rule, that
	// would have denied (or failed, which denies); nil when none did.
	WouldDeny []*Rule
}

// Check evaluates the rules in order against in and returns the first
// enforced rule that denies, and the shadow rules before it that would
// have.
func (s *Set) Check(in *Input) Result {
	if s == nil || len(s.rules) == 0 {
		return Result{}
	}
	a := &activation{set: s, in: in}
	var v Result
	for i := range s.rules {
		c := &s.rules[i]
		if c.skips(in) {
			continue
		}
		out, _, err := c.prog.Eval(a)
		deny, err := denies(out, err)
		switch {
		case !deny:
		case c.rule.Shadow():
			v.WouldDeny = append(v.WouldDeny, c.rule)
		default:
			v.Rule, v.Err = c.rule, err
			return v
		}
	}
	return v
}

// errUnknown is the error of a rule whose result depends on a value not
// given (never so in Check, where every variable is known).
var errUnknown = errors.New("the result depends on an unknown value")

// denies interprets the result of a rule: true denies, false allows,
// anything else (an error, a non-bool, an unknown) denies with an error.
func denies(out ref.Val, err error) (bool, error) {
	if err != nil {
		return true, err
	}
	switch out {
	case types.True:
		return true, nil
	case types.False:
		return false, nil
	}
	if types.IsUnknown(out) {
		return true, errUnknown
	}
	return true, fmt.Errorf("the result is a %s, not a bool", out.Type().TypeName())
}
