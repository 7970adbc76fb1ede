package envoytest

import (
	"fmt"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"golang.org/x/net/http/httpguts"
)

// hdr is one header entry as Envoy's header map holds it: lower-case key,
// one value (repeated headers are separate entries).
type hdr struct{ k, v string }

// headerList is an ordered header map, pseudo-headers included.
type headerList []hdr

// headersFromHTTP converts h to lower-case entries sorted by name (so the
// messages are deterministic), skipping Host.
func headersFromHTTP(h http.Header) headerList {
	keys := make([]string, 0, len(h))
	for k := range h {
		if strings.EqualFold(k, "host") {
			continue
		}
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return strings.Compare(strings.ToLower(a), strings.ToLower(b)) })
	var l headerList
	for _, k := range keys {
		for _, v := range h[k] {
			l = append(l, hdr{strings.ToLower(k), v})
		}
	}
	return l
}

func (l headerList) get(k string) (string, bool) {
	for _, e := range l {
		if e.k == k {
			return e.v, true
		}
	}
	return "", false
}

// set replaces the first entry named k and drops the others (Envoy's setCopy),
// or appends one.
func (l *headerList) set(k, v string) {
	out := (*l)[:0]
	done := false
	for _, e := range *l {
		if e.k == k {
			if done {
				continue
			}
			e.v, done = v, true
		}
		out = append(out, e)
	}
	if !done {
		out = append(out, hdr{k, v})
	}
	*l = out
}

func (l *headerList) add(k, v string) { *l = append(*l, hdr{k, v}) }

func (l *headerList) del(k string) {
	*l = slices.DeleteFunc(*l, func(e hdr) bool { return e.k == k })
}

// proto encodes l as Envoy does: values in raw_value only.
func (l headerList) proto() *corev3.HeaderMap {
	m := &corev3.HeaderMap{Headers: make([]*corev3.HeaderValue, 0, len(l))}
	for _, e := range l {
		m.Headers = append(m.Headers, &corev3.HeaderValue{Key: e.k, RawValue: []byte(e.v)})
	}
	return m
}

// http converts l to an http.Header with canonical keys, without pseudo-headers.
func (l headerList) http() http.Header {
	h := make(http.Header, len(l))
	for _, e := range l {
		if strings.HasPrefix(e.k, ":") {
			continue
		}
		k := textproto.CanonicalMIMEHeaderKey(e.k)
		h[k] = append(h[k], e.v)
	}
	return h
}

// contentLength reports the content-length value when present and numeric.
func (l headerList) contentLength() (int, bool) {
	v, ok := l.get("content-length")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// mutationError is a header mutation Envoy fails the exchange for.
type mutationError struct{ msg string }

func (e *mutationError) Error() string { return e.msg }

// mutator applies HeaderMutations as Envoy's MutationUtils::applyHeaderMutations
// does with the filter's mutation rules.
type mutator struct {
	disallowIsError bool
	res             *Result
}

// routingHeaders may not be changed under Envoy's default mutation rules.
var routingHeaders = []string{"host", ":authority", ":method", ":scheme"}

// allowedByDefaultRules is the default HeaderMutationRules check for a set:
// no routing header, nothing starting with "x-envoy" (the prefix has no dash:
// "x-envoyfoo" is refused too).
func allowedByDefaultRules(k string) bool {
	if slices.Contains(routingHeaders, k) {
		return false
	}
	return !strings.HasPrefix(k, "x-envoy")
}

// removable is the rule for a removal: never a pseudo-header or host, and the
// default rules.
func removable(k string) bool {
	return !strings.HasPrefix(k, ":") && k != "host" && allowedByDefaultRules(k)
}

// validStatus is the check on a :status mutation: a number from 200 to 999.
func validStatus(v string) bool {
	n, err := strconv.Atoi(v)
	return err == nil && n >= 200 && n <= 999
}

// mutation says how one HeaderMutation is applied.
type mutation struct {
	where string
	// replacing is CONTINUE_AND_REPLACE (which may change :method).
	replacing bool
	// dropContentLength skips content-length sets, as Envoy does in
	// STREAMED, BUFFERED_PARTIAL and BUFFERED-with-headers-SKIP.
	dropContentLength bool
	// skipDisallowed ignores what the rules refuse even with
	// disallow_is_error, as Envoy does for an ImmediateResponse's headers.
	skipDisallowed bool
}

// disallowed handles a mutation the rules refuse: a failure under
// disallow_is_error, otherwise ignored and listed in RejectedMutations.
func (mu *mutator) disallowed(o mutation, op, k, why string) error {
	if mu.disallowIsError && !o.skipDisallowed {
		return &mutationError{fmt.Sprintf("%s: invalid attempt to %s %s (%s)", o.where, op, k, why)}
	}
	mu.res.RejectedMutations = append(mu.res.RejectedMutations, op+" "+k)
	return nil
}

// apply applies m to h under the mutation rules.
func (mu *mutator) apply(h *headerList, m *extprocv3.HeaderMutation, o mutation) error {
	for _, name := range m.GetRemoveHeaders() {
		if !validName(name) {
			return &mutationError{fmt.Sprintf("%s: invalid character in remove_headers entry %q", o.where, name)}
		}
		k := strings.ToLower(name)
		if !removable(k) {
			if err := mu.disallowed(o, "remove", k, "system, host, routing or x-envoy header"); err != nil {
				return err
			}
			continue
		}
		h.del(k)
	}
	for _, hv := range m.GetSetHeaders() {
		if err := mu.set(h, hv, o); err != nil {
			return err
		}
	}
	return nil
}

// set applies one set_headers entry.
func (mu *mutator) set(h *headerList, o *corev3.HeaderValueOption, opt mutation) error {
	hv := o.GetHeader()
	if hv == nil {
		return nil
	}
	where := opt.where
	k := strings.ToLower(hv.GetKey())
	if opt.dropContentLength && k == "content-length" {
		mu.res.note("%s: content-length set by the processor dropped (Envoy removes it in this body mode)", where)
		return nil
	}
	if hv.GetValue() != "" && len(hv.GetRawValue()) > 0 {
		return &mutationError{fmt.Sprintf("%s: header %q sets both value and raw_value", where, k)}
	}
	if hv.GetValue() != "" {
		return &mutationError{fmt.Sprintf("%s: header %q sets only value; Envoy reads raw_value and would send an empty value", where, k)}
	}
	v := string(hv.GetRawValue())
	if !validName(hv.GetKey()) || !validValue(v) {
		return &mutationError{fmt.Sprintf("%s: invalid character in set_headers entry %q", where, k)}
	}
	if o.GetAppendAction() != corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD {
		mu.res.note("%s: append_action of %q ignored (ext_proc honours only append)", where, k)
	}
	appending := o.GetAppend().GetValue()
	switch {
	case !allowedByDefaultRules(k) && !(opt.replacing && k == ":method"):
		return mu.disallowed(opt, "set", k, "routing or x-envoy header")
	case appending && strings.HasPrefix(k, ":"):
		return mu.disallowed(opt, "append", k, "system header")
	case k == ":status" && !validStatus(v):
		return mu.disallowed(opt, "set", k, fmt.Sprintf("status %q below 200 or not a number", v))
	}
	if appending {
		h.add(k, v)
	} else {
		h.set(k, v)
	}
	return nil
}

// validName is Envoy's headerNameIsValid: a token, optionally a pseudo-header.
func validName(name string) bool {
	return httpguts.ValidHeaderFieldName(strings.TrimPrefix(name, ":"))
}

// validValue is Envoy's headerValueIsValid: no NUL, CR or LF.
func validValue(v string) bool { return !strings.ContainsAny(v, "\x00\r\n") }
