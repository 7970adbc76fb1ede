// Package pii is the built-in PII filter: cpex-plugins' pii_filter
// (cpex_pii_filter.PIIFilterPlugin, formerly ContextForge's
// plugins.pii_filter.pii_filter.PIIFilterPlugin). It finds SSNs, credit
// card numbers (Luhn and issuer checked), e-mail addresses, phone numbers,
// IP addresses, dates of birth, passport, driver's license, bank account
// and medical record numbers, Dutch BSNs, AWS and API keys, and custom
// patterns in prompt arguments, prompt messages, tool arguments and tool
// results, and masks them (redact, partial, hash, tokenize, remove) or
// blocks the message.
//
// The patterns are those cpex-plugins documents, in RE2; the common
// numeric ones run only on the digit clusters of a string and the labeled
// ones only near their labels, so a clean text costs one pass over its
// bytes.
package pii

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"sort"
	"strings"
	"sync"
	"unsafe"

	"github.com/mcp-extproc/mcp-extproc/pkg/builtin/jsonscan"
	"github.com/mcp-extproc/mcp-extproc/pkg/builtin/plugin"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// Spec describes the plugin.
func Spec() plugin.Spec {
	return plugin.Spec{
		Name: "pii_filter",
		Kinds: []string{
			"plugins.pii_filter.pii_filter.PIIFilterPlugin",
			"cpex_pii_filter.PIIFilterPlugin",
			"cpex_pii_filter.pii_filter.PIIFilterPlugin",
		},
		Hooks: []cpex.HookType{cpex.PromptPreFetch, cpex.PromptPostFetch, cpex.ToolPreInvoke, cpex.ToolPostInvoke},
		Keys:  keys,
		New:   New,
	}
}

var detectKeys = []struct {
	key string
	typ Type
	on  bool // default
}{
	{"detect_ssn", SSN, true},
	{"detect_bsn", BSN, true},
	{"detect_credit_card", CreditCard, true},
	{"detect_email", Email, true},
	{"detect_phone", Phone, true},
	{"detect_ip_address", IPAddress, true},
	{"detect_date_of_birth", DateOfBirth, true},
	{"detect_passport", Passport, true},
	{"detect_driver_license", DriverLicense, true},
	{"detect_bank_account", BankAccount, true},
	{"detect_medical_record", MedicalRecord, true},
	// ContextForge's Python plugin had these two; cpex-plugins dropped them
	// (secrets_detection covers keys), so they are off unless set.
	{"detect_aws_keys", AWSKey, false},
	{"detect_api_keys", APIKey, false},
}

var keys = func() []plugin.Key {
	k := []plugin.Key{}
	for _, d := range detectKeys {
		k = append(k, plugin.Key{Name: d.key, Supported: true, Note: fmt.Sprintf("detect %s (default %v)", d.typ, d.on)})
	}
	return append(k,
		plugin.Key{Name: "default_mask_strategy", Supported: true, Note: "redact (default), partial, hash, tokenize or remove"},
		plugin.Key{Name: "redaction_text", Supported: true, Note: `the text of redact (default "[REDACTED]")`},
		plugin.Key{Name: "block_on_detection", Supported: true, Note: "refuse the message instead of masking (default false)"},
		plugin.Key{Name: "whitelist_patterns", Supported: true, Note: "regular expressions (RE2, ignoring case); a detection they match is kept"},
		plugin.Key{Name: "custom_patterns", Supported: true, Note: "{pattern, description, mask_strategy, enabled}; at most 256 characters, 16 alternations, 24 repetitions"},
		plugin.Key{Name: "max_text_bytes", Supported: true, Note: "a larger string fails the hook (default 10 MiB, at most 100 MiB)"},
		plugin.Key{Name: "max_nested_depth", Supported: true, Note: "deeper values fail the hook (default 32, at most 1000)"},
		plugin.Key{Name: "max_collection_items", Supported: true, Note: "a larger list or object fails the hook (default 4096, at most 1000000)"},
		plugin.Key{Name: "include_detection_details", Supported: true, Note: "accepted; a no-op, as in cpex-plugins"},
		plugin.Key{Name: "log_detections", Supported: false, Note: "the sidecar never logs detections"},
	)
}()

type customPattern struct {
	Type         string   `json:"type"` // ContextForge's Python form; ignored
	Pattern      string   `json:"pattern"`
	Description  string   `json:"description"`
	MaskStrategy Strategy `json:"mask_strategy"`
	Enabled      *bool    `json:"enabled"`
}

type config struct {
	DefaultMaskStrategy Strategy        `json:"default_mask_strategy"`
	RedactionText       *string         `json:"redaction_text"`
	BlockOnDetection    bool            `json:"block_on_detection"`
	WhitelistPatterns   []string        `json:"whitelist_patterns"`
	CustomPatterns      []customPattern `json:"custom_patterns"`
	MaxTextBytes        *int            `json:"max_text_bytes"`
	MaxNestedDepth      *int            `json:"max_nested_depth"`
	MaxCollectionItems  *int            `json:"max_collection_items"`
}

// Limits of cpex-plugins' pii_filter.
const (
	defaultMaxTextBytes       = 10 << 20
	maxMaxTextBytes           = 100 << 20
	defaultMaxNestedDepth     = 32
	maxMaxNestedDepth         = 1000
	defaultMaxCollectionItems = 4096
	maxMaxCollectionItems     = 1_000_000
	maxCustomPatternLen       = 256
	maxCustomAlternations     = 16
	maxCustomRepetitions      = 24
)

// Plugin is a configured PII filter.
type Plugin struct {
	det      *detector
	cl       *classes
	masker   masker
	strategy Strategy
	block    bool
	maxText  int
	walker   jsonscan.Walker
	decs     jsonscan.Decoders
	calls    sync.Pool // *call
	// noPrefilter makes every call walk its payload (mayHold's tests
	// compare the two).
	noPrefilter bool
}

// New builds the filter from its config: block.
func New(cfg map[string]any) (plugin.Plugin, []plugin.Issue, error) {
	var c config
	issues := plugin.Decode(cfg, &c, keys)
	on := map[Type]bool{}
	for _, d := range detectKeys {
		on[d.typ] = d.on
		if v, set := cfg[d.key]; set {
			b, ok := v.(bool)
			if !ok {
				issues = append(issues, plugin.Problem(d.key, "must be true or false"))
			}
			on[d.typ] = b
		}
	}
	p := &Plugin{cl: classTable(), strategy: Redact, block: c.BlockOnDetection,
		maxText: defaultMaxTextBytes, walker: jsonscan.Walker{MaxDepth: defaultMaxNestedDepth, MaxItems: defaultMaxCollectionItems}}
	p.masker.redaction = "[REDACTED]"
	if c.RedactionText != nil {
		p.masker.redaction = *c.RedactionText
	}
	var salt [16]byte
	_, _ = rand.Read(salt[:])
	p.masker.salt = hex.EncodeToString(salt[:])
	if c.DefaultMaskStrategy != "" {
		if !c.DefaultMaskStrategy.valid() {
			issues = append(issues, plugin.Problem("default_mask_strategy", fmt.Sprintf("%q: want redact, partial, hash, tokenize or remove", c.DefaultMaskStrategy)))
		}
		p.strategy = c.DefaultMaskStrategy
	}
	limit := func(key string, v *int, def, most int) int {
		switch {
		case v == nil:
			return def
		case *v <= 0 || *v > most:
			issues = append(issues, plugin.Problem(key, fmt.Sprintf("must be between 1 and %d", most)))
			return def
		}
		return *v
	}
	p.maxText = limit("max_text_bytes", c.MaxTextBytes, defaultMaxTextBytes, maxMaxTextBytes)
	p.walker.MaxDepth = limit("max_nested_depth", c.MaxNestedDepth, defaultMaxNestedDepth, maxMaxNestedDepth)
	p.walker.MaxItems = limit("max_collection_items", c.MaxCollectionItems, defaultMaxCollectionItems, maxMaxCollectionItems)
	var custom []rule
	for i, cp := range c.CustomPatterns {
		f := fmt.Sprintf("custom_patterns[%d]", i)
		if cp.Enabled != nil && !*cp.Enabled {
			continue
		}
		if cp.MaskStrategy != "" && !cp.MaskStrategy.valid() {
			issues = append(issues, plugin.Problem(f+".mask_strategy", fmt.Sprintf("%q: want redact, partial, hash, tokenize or remove", cp.MaskStrategy)))
		}
		re, err := compileCustom(cp.Pattern)
		if err != nil {
			issues = append(issues, plugin.Problem(f+".pattern", err.Error()))
			continue
		}
		custom = append(custom, rule{typ: Custom, re: re, strategy: cp.MaskStrategy})
	}
	var whitelist []*regexp.Regexp
	for i, w := range c.WhitelistPatterns {
		re, err := regexp.Compile(`(?i)` + w)
		if err != nil {
			issues = append(issues, plugin.Problem(fmt.Sprintf("whitelist_patterns[%d]", i), fmt.Sprintf("not an RE2 regular expression: %v", err)))
			continue
		}
		whitelist = append(whitelist, re)
	}
	if err := plugin.Err(issues); err != nil {
		return nil, issues, err
	}
	p.det = newDetector(on, custom, whitelist)
	p.walker.Decoders = &p.decs
	return p, issues, nil
}

// compileCustom compiles a custom pattern (ignoring case) within the
// documented complexity limits.
func compileCustom(pattern string) (*regexp.Regexp, error) {
	switch {
	case pattern == "":
		return nil, errors.New("required")
	case len(pattern) > maxCustomPatternLen:
		return nil, fmt.Errorf("longer than %d characters", maxCustomPatternLen)
	}
	if _, err := syntax.Parse(pattern, syntax.Perl); err != nil {
		return nil, fmt.Errorf("not an RE2 regular expression: %v", err)
	}
	// Counted on the text, as the documented limits count characters.
	var alts, reps int
	for i := 0; i < len(pattern); i++ {
		switch pattern[i] {
		case '\\':
			i++
		case '|':
			alts++
		case '*', '+', '?', '{':
			reps++
		}
	}
	switch {
	case alts > maxCustomAlternations:
		return nil, fmt.Errorf("more than %d alternations", maxCustomAlternations)
	case reps > maxCustomRepetitions:
		return nil, fmt.Errorf("more than %d repetitions", maxCustomRepetitions)
	}
	return regexp.Compile(`(?i)` + pattern)
}

// stage is what one hook scans, and how it is refused.
type stage struct {
	member                    string
	messagesText              bool // only result.messages[].content.text
	reason, description, code string
}

var stages = map[cpex.HookType]stage{
	cpex.PromptPreFetch:  {"args", false, "PII detected in prompt arguments", "Sensitive information detected in prompt arguments", "PII_DETECTED"},
	cpex.PromptPostFetch: {"result", true, "PII detected in prompt messages", "Sensitive information detected in prompt result", "PII_DETECTED_IN_PROMPT_RESULT"},
	cpex.ToolPreInvoke:   {"args", false, "PII detected in tool arguments", "Sensitive information detected in tool arguments", "PII_DETECTED_IN_TOOL_ARGS"},
	cpex.ToolPostInvoke:  {"result", false, "PII detected in tool result", "Sensitive information detected in tool result", "PII_DETECTED_IN_TOOL_RESULT"},
}

// errTooLarge is the failure of a string over max_text_bytes.
var errTooLarge = errors.New("string over max_text_bytes")

// call is the state of one Invoke, pooled with its scratch buffers: the
// visitor the walker calls is bound to it once, so that a call that finds
// nothing allocates nothing of its own.
type call struct {
	p        *Plugin
	st       stage
	sc       scratch
	count    int
	found    map[Type]bool
	tooLarge bool
	visit    jsonscan.Func // c.rewrite
}

// Invoke implements plugin.Plugin.
func (p *Plugin) Invoke(_ context.Context, hook cpex.HookType, payload json.RawMessage, _ *cpex.PluginContext) (*cpex.PluginResult, error) {
	if !p.mayHold(payload) { // most calls: first, before even the stage's lookup
		return nil, nil
	}
	st, ok := stages[hook]
	if !ok {
		return nil, nil
	}
	c, _ := p.calls.Get().(*call)
	if c == nil {
		c = &call{p: p, found: map[Type]bool{}}
		c.visit = c.rewrite
	}
	defer p.calls.Put(c)
	c.st, c.count, c.tooLarge = st, 0, false
	clear(c.found)
	w := p.walker
	w.Paths = st.messagesText
	out, changed, err := w.Rewrite(payload, st.member, c.visit)
	switch {
	case err != nil:
		return nil, fmt.Errorf("pii_filter: %w", err)
	case c.tooLarge:
		return nil, fmt.Errorf("pii_filter: %w (%d bytes)", errTooLarge, p.maxText)
	case c.count == 0:
		return nil, nil
	case p.block:
		types := make([]string, 0, len(c.found))
		for t := range c.found {
			types = append(types, string(t))
		}
		sort.Strings(types)
		return plugin.Block(&cpex.PluginViolation{
			Reason: st.reason, Description: st.description, Code: st.code,
			Details: map[string]any{"detected_types": types, "count": c.count},
		}), nil
	case changed:
		return plugin.Modified(out), nil
	}
	return nil, nil
}

// mayHold reports whether the walk over payload could find PII or fail.
// It is false only when the walk would visit every string in vain: up
// to prefilterMaxBytes, no
// escape (so every string appears verbatim in payload, between quotes,
// which no pattern reads as part of a word or a number), no pattern that
// the detector's pass over all of payload would run (a superset of each
// string's pass; a custom pattern always runs), and
// payload within the limits (no string over max_text_bytes, no nesting
// or collection over the walker's bounds, counted generously). A clean
// small call, most of them, then costs one pass over its bytes and no
// decoder.
//
// Malformed JSON or a duplicate member name, which the walk would refuse,
// are not looked for: the sidecar refuses both in what clients and
// servers send, and again in what a plugin returns before it is
// forwarded.
func (p *Plugin) mayHold(payload []byte) bool {
	switch {
	case p.noPrefilter, len(payload) > prefilterMaxBytes, len(payload) > p.maxText, bytes.IndexByte(payload, '\\') >= 0,
		bytes.Count(payload, []byte("{"))+bytes.Count(payload, []byte("[")) > p.walker.MaxDepth,
		bytes.Count(payload, []byte(","))+1 > p.walker.MaxItems:
		return true
	}
	// The pass only reads, and keeps nothing: payload is looked at in
	// place rather than copied.
	return p.det.mayMatch(unsafe.String(unsafe.SliceData(payload), len(payload)), p.cl)
}

// prefilterMaxBytes bounds the payloads mayHold looks at. Its pass costs
// about what the walk's own pass over the strings does (2 ns a byte); what
// skipping saves is the decoder, about 300 ns, and what a payload that has
// something to find loses is the pass up to its first candidate. Past a
// few hundred bytes the loss can outweigh the saving (a 4 KB text whose
// only PII is at its end: a third slower).
const prefilterMaxBytes = 512

// rewrite is the walker's visitor: it counts the detections in s and
// returns it masked.
func (c *call) rewrite(path []string, s string) (string, bool) {
	p, st := c.p, &c.st
	if st.messagesText && !(len(path) == 3 && path[0] == "messages" && path[1] == "content" && path[2] == "text") {
		return "", false
	}
	if len(s) > p.maxText {
		c.tooLarge = true
		return "", false
	}
	ms := p.det.find(s, p.cl, &c.sc)
	if len(ms) == 0 {
		return "", false
	}
	c.count += len(ms)
	var b strings.Builder
	at := 0
	for _, m := range ms {
		r := &p.det.rules[m.rule]
		c.found[r.typ] = true
		strategy := r.strategy
		if strategy == "" {
			strategy = p.strategy
		}
		b.WriteString(s[at:m.start])
		b.WriteString(p.masker.mask(s[m.start:m.end], r.typ, strategy))
		at = m.end
	}
	b.WriteString(s[at:])
	return b.String(), true
}

// Close implements plugin.Plugin.
func (p *Plugin) Close() error { return nil }

// NonBlocking implements plugin.NonBlocking: Invoke only computes.
func (p *Plugin) NonBlocking() bool { return true }
