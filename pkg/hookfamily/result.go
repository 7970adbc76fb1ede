package hookfamily

import (
	"bytes"
	"fmt"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// resultTypeInputRequired is the resultType of an MCP 2026-07-28 multi
// round-trip answer: a request for input, not the final result. The client
// repeats the call with the input, and the last answer is the result.
const resultTypeInputRequired = "input_required"

// HookedResult returns the part of an answer's raw result that the route's
// post hook inspects, and false when the answer carries nothing for it: an
// input_required answer (the post hook runs on the final answer of the
// repeated call), or an answer without the route's ResultMember (a task
// status without its result).
func (r *Route) HookedResult(result []byte) ([]byte, bool) {
	if inputRequired(result) {
		return nil, false
	}
	if r.ResultMember == "" {
		return result, true
	}
	var m map[string]jsontext.Value
	if err := json.Unmarshal(result, &m); err != nil {
		return nil, false
	}
	inner := m[r.ResultMember]
	if inner.Kind() != '{' {
		return nil, false
	}
	return inner, true
}

// WithHookedResult returns the answer's result with the part HookedResult
// returned replaced by inner (a JSON object).
func (r *Route) WithHookedResult(result, inner []byte) ([]byte, error) {
	if r.ResultMember == "" {
		return inner, nil
	}
	var m map[string]jsontext.Value
	if err := json.Unmarshal(result, &m); err != nil {
		return nil, fmt.Errorf("%s result: %w", r.Method, err)
	}
	m[r.ResultMember] = jsontext.Value(inner)
	out, err := json.Marshal(m, json.Deterministic(true))
	if err != nil {
		return nil, fmt.Errorf("%s result: %w", r.Method, err)
	}
	return out, nil
}

// inputRequired reports whether a raw result is a multi round-trip request
// for input (resultType "input_required").
func inputRequired(result []byte) bool {
	if !bytes.Contains(result, []byte(resultTypeInputRequired)) && !bytes.Contains(result, []byte(`\u`)) {
		return false
	}
	var v struct {
		ResultType string `json:"resultType"`
	}
	if err := json.Unmarshal(result, &v); err != nil {
		return false
	}
	return v.ResultType == resultTypeInputRequired
}
