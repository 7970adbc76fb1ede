package hookfamily

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// PrePayload encodes the pre hook payload around raw JSON that was
// validated already: {"<TargetKey>":target,"<ArgsKey>":args} plus
// "<HeadersKey>":headers when the family carries headers and headers is not
// empty. Empty args become {}. Nothing is decoded or re-encoded.
func (f *Family) PrePayload(target string, args, headers []byte) (json.RawMessage, error) {
	if len(args) == 0 {
		args = []byte("{}")
	}
	if f.HeadersKey == "" {
		headers = nil
	}
	return rawObject(f.TargetKey, target, f.ArgsKey, args, f.HeadersKey, headers)
}

// PostPayload encodes the post hook payload around the raw MCP result:
// {"<TargetKey>":target,"<ResultKey>":result}.
func (f *Family) PostPayload(target string, result []byte) (json.RawMessage, error) {
	return rawObject(f.TargetKey, target, f.ResultKey, result, "", nil)
}

// ResultOf returns the MCP result held by a modified post payload. It must
// be a JSON object: it replaces a JSON-RPC result.
func (f *Family) ResultOf(payload json.RawMessage) ([]byte, error) {
	var p map[string]json.RawMessage
	if err := json.Unmarshal(payload, &p); err != nil {
		return nil, fmt.Errorf("%s payload: %w", f.Post, err)
	}
	res := p[f.ResultKey]
	if len(res) == 0 || res[0] != '{' {
		return nil, errors.New("result is not a JSON object")
	}
	return res, nil
}

// PreEdit is what a modified pre payload changes in the request.
type PreEdit struct {
	// Params maps params members to their new raw JSON values (for
	// mcpmsg.ReplaceParams).
	Params map[string][]byte
	// Name is the new target name (the value put in Params[TargetParam]).
	Name string
	// Headers are the HTTP headers of the payload (families with
	// HeadersKey), as the plugin left them; nil when absent.
	Headers map[string]string
}

// EditOf maps a modified pre payload back onto the request's params: the
// target name goes to TargetParam (re-encoded), the arguments, when present,
// to ArgsParam. The target is read from TargetKey, or from LegacyTargetKey
// when the payload has no TargetKey (a plugin written for an older
// ContextForge). A route without TargetParam takes no pre hook and has no
// edit.
func (r *Route) EditOf(payload json.RawMessage) (PreEdit, error) {
	f := r.Family
	var p map[string]json.RawMessage
	if err := json.Unmarshal(payload, &p); err != nil {
		return PreEdit{}, fmt.Errorf("%s payload: %w", f.Pre, err)
	}
	var name string
	key := f.TargetKey
	if _, ok := p[key]; !ok && f.LegacyTargetKey != "" {
		if _, ok := p[f.LegacyTargetKey]; ok {
			key = f.LegacyTargetKey
		}
	}
	if v := p[key]; len(v) > 0 {
		if err := json.Unmarshal(v, &name); err != nil {
			return PreEdit{}, fmt.Errorf("%s payload: %s: %w", f.Pre, key, err)
		}
	}
	enc, _ := json.Marshal(name)
	edit := PreEdit{Params: map[string][]byte{r.TargetParam: enc}, Name: name}
	if args := p[f.ArgsKey]; r.ArgsParam != "" && len(args) > 0 {
		edit.Params[r.ArgsParam] = args
	}
	if h := p[f.HeadersKey]; f.HeadersKey != "" && len(h) > 0 {
		if err := json.Unmarshal(h, &edit.Headers); err != nil {
			return PreEdit{}, fmt.Errorf("%s payload: %s: %w", f.Pre, f.HeadersKey, err)
		}
	}
	return edit, nil
}

// rawObject encodes {"<key>":"<value>","<rawKey>":<raw>[,"<optKey>":<opt>]}
// around raw JSON that was validated already; opt is left out when empty.
func rawObject(key, value, rawKey string, raw []byte, optKey string, opt []byte) (json.RawMessage, error) {
	b := make([]byte, 0, len(value)+len(raw)+len(opt)+len(key)+len(rawKey)+len(optKey)+16)
	b = append(b, `{"`...)
	b = append(b, key...)
	b = append(b, `":`...)
	b, err := jsontext.AppendQuote(b, value)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", key, err)
	}
	b = appendMember(b, rawKey, raw)
	if len(opt) > 0 {
		b = appendMember(b, optKey, opt)
	}
	return append(b, '}'), nil
}

func appendMember(b []byte, key string, raw []byte) []byte {
	b = append(b, `,"`...)
	b = append(b, key...)
	b = append(b, `":`...)
	return append(b, raw...)
}

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
	if err := jsonv2.Unmarshal(result, &m); err != nil {
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
	if err := jsonv2.Unmarshal(result, &m); err != nil {
		return nil, fmt.Errorf("%s result: %w", r.Method, err)
	}
	m[r.ResultMember] = jsontext.Value(inner)
	out, err := jsonv2.Marshal(m, jsonv2.Deterministic(true))
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
	if err := jsonv2.Unmarshal(result, &v); err != nil {
		return false
	}
	return v.ResultType == resultTypeInputRequired
}
