package executor

import (
	"encoding/json"
	"fmt"
	"maps"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// The HTTP-level hooks do not answer with a new payload of their own kind
// (docs/identity.md): http_pre_request answers with the headers to set, and
// http_auth_resolve_user with the user. The cpex host passes such an answer
// on as the next plugin's payload, which an external plugin fails to
// validate; here every plugin gets a full payload:
//
//	http_pre_request        the returned header map is set over the
//	                        payload's headers; the next plugin sees the
//	                        merged headers, Outcome.Payload is the merged
//	                        payload
//	http_auth_resolve_user  the payload stays as it was for every plugin;
//	                        the returned object is the user, and the last
//	                        one returned is Outcome.Payload (cpex's last
//	                        writer wins)

// fold applies a plugin's modified_payload to the run, after the mode
// allowed it; it reports whether anything changed.
func (r *run) fold(mod json.RawMessage) (bool, error) {
	switch r.hook {
	case cpex.HTTPPreRequest:
		var set map[string]string
		if err := json.Unmarshal(mod, &set); err != nil || set == nil {
			return false, fmt.Errorf("%w: %s: the headers must be an object of strings", ErrInvalidPayload, r.hook)
		}
		var p map[string]json.RawMessage
		var headers map[string]string
		if err := json.Unmarshal(r.cur, &p); err != nil {
			return false, fmt.Errorf("%s: current payload: %w", r.hook, err)
		}
		if err := json.Unmarshal(p["headers"], &headers); err != nil || headers == nil {
			headers = map[string]string{}
		}
		before := maps.Clone(headers)
		maps.Copy(headers, set)
		if maps.Equal(before, headers) {
			return false, nil
		}
		b, err := json.Marshal(headers)
		if err != nil {
			return false, err
		}
		p["headers"] = b
		if r.cur, err = json.Marshal(p); err != nil {
			return false, err
		}
		return true, nil
	case cpex.HTTPAuthResolveUser:
		var user map[string]json.RawMessage
		if err := json.Unmarshal(mod, &user); err != nil || user == nil {
			return false, fmt.Errorf("%w: %s: the user must be an object", ErrInvalidPayload, r.hook)
		}
		r.result = mod
		return true, nil
	}
	if err := checkPayload(r.hook, mod); err != nil {
		return false, err
	}
	if jsonEqual(r.cur, mod) {
		return false, nil
	}
	r.cur = mod
	return true, nil
}
