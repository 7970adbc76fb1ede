package executor

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"time"

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
//	http_auth_check_permission  the payload stays as it was; the answer
//	                        {granted, reason} is the result. granted:false
//	                        from a plugin whose mode may block is a block
//	                        (a PERMISSION_DENIED violation, HTTP 403,
//	                        naming the plugin); from one that may not, it
//	                        is logged and not enforced
//	identity_resolve        the payload stays as it was; the answer is the
//	                        result (the last subject answered wins);
//	                        rejected:true from a plugin whose mode may
//	                        block is a block (IDENTITY_REJECTED, its
//	                        reject_status, 401 by default)
//	token_delegate          the payload stays as it was; the answer (the
//	                        delegated credential) is the result, the last
//	                        one answered wins
//	http_post_request       as http_pre_request, on the response headers:
//	                        the returned map is set over the payload's
//	                        response_headers

// fold applies a plugin's modified_payload to the run, after the mode
// allowed it; it reports whether anything changed.
func (r *run) fold(mod json.RawMessage) (bool, error) {
	switch r.hook {
	case cpex.HTTPPreRequest:
		return r.foldHeaders(mod, "headers")
	case cpex.HTTPPostRequest:
		return r.foldHeaders(mod, "response_headers")
	case cpex.HTTPAuthCheckPermission:
		var dec cpex.PermissionDecision
		if err := json.Unmarshal(mod, &dec); err != nil || dec.Granted == nil {
			return false, fmt.Errorf("%w: %s: want an object with a boolean granted", ErrInvalidPayload, r.hook)
		}
		r.result = mod
		return true, nil
	case cpex.IdentityResolve:
		var res cpex.IdentityResolution
		if err := json.Unmarshal(mod, &res); err != nil {
			return false, fmt.Errorf("%w: %s: want an object with subject and rejected", ErrInvalidPayload, r.hook)
		}
		r.result = mod
		return true, nil
	case cpex.TokenDelegate:
		var d cpex.Delegation
		if err := json.Unmarshal(mod, &d); err != nil {
			return false, fmt.Errorf("%w: %s: want an object whose forwarded_headers are strings", ErrInvalidPayload, r.hook)
		}
		r.result = mod
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

// foldHeaders sets the header map mod over the payload's member key.
func (r *run) foldHeaders(mod json.RawMessage, key string) (bool, error) {
	var set map[string]string
	if err := json.Unmarshal(mod, &set); err != nil || set == nil {
		return false, fmt.Errorf("%w: %s: the headers must be an object of strings", ErrInvalidPayload, r.hook)
	}
	var p map[string]json.RawMessage
	var headers map[string]string
	if err := json.Unmarshal(r.cur, &p); err != nil {
		return false, fmt.Errorf("%s: current payload: %w", r.hook, err)
	}
	if err := json.Unmarshal(p[key], &headers); err != nil || headers == nil {
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
	p[key] = b
	if r.cur, err = json.Marshal(p); err != nil {
		return false, err
	}
	return true, nil
}

// deny blocks the run when en's answer is a denial (denial) in a mode that
// may block; it reports whether it did. An answer of the wrong shape is
// left to fold (a failure under on_error).
func (r *run) deny(en *entry, res *cpex.PluginResult, d time.Duration, mayBlock bool) bool {
	if !res.Modified() {
		return false
	}
	v := r.denial(res.ModifiedPayload)
	if v == nil {
		return false
	}
	if !mayBlock {
		r.log.Warn().Str("plugin", en.name).Str("mode", string(en.mode)).Str("code", v.Code).Msg("denial not enforced: mode cannot block")
		return false
	}
	v.PluginName = en.name
	r.violation = v
	r.observe(en, Blocked, d)
	r.log.Debug().Str("plugin", en.name).Str("mode", string(en.mode)).Str("code", v.Code).Dur("duration", d).Msg("plugin denied the request")
	return true
}

// denial returns the violation an answer amounts to: granted:false for
// http_auth_check_permission (403), rejected:true for identity_resolve
// (its reject_status, 401 unless a 4xx/5xx); nil for anything else.
func (r *run) denial(mod json.RawMessage) *cpex.PluginViolation {
	switch r.hook {
	case cpex.HTTPAuthCheckPermission:
		var dec cpex.PermissionDecision
		if json.Unmarshal(mod, &dec) != nil || dec.Granted == nil || *dec.Granted {
			return nil
		}
		status := http.StatusForbidden
		return &cpex.PluginViolation{Reason: "Permission denied", Description: orDefault(dec.Reason, "permission not granted"),
			Code: "PERMISSION_DENIED", HTTPStatusCode: &status}
	case cpex.IdentityResolve:
		var res cpex.IdentityResolution
		if json.Unmarshal(mod, &res) != nil || !res.Rejected {
			return nil
		}
		status := http.StatusUnauthorized
		if s := res.RejectStatus; s != nil && *s >= 400 && *s <= 599 {
			status = int(*s)
		}
		return &cpex.PluginViolation{Reason: "Identity rejected", Description: orDefault(res.RejectReason, "token rejected"),
			Code: "IDENTITY_REJECTED", HTTPStatusCode: &status}
	}
	return nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
