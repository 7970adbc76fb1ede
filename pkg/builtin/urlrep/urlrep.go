// Package urlrep is the built-in URL reputation check: cpex-plugins'
// url_reputation (cpex_url_reputation.URLReputationPlugin, formerly
// ContextForge's plugins.url_reputation.url_reputation.URLReputationPlugin).
// A resource fetch is refused before it happens when its URL is not https,
// its domain or a parent is blocked, it matches a blocked pattern, or
// (heuristics on) its domain looks generated, has no ICANN top-level
// domain, or mixes scripts; allow lists and allowed patterns pass first.
// The checks are static: no reputation service is called.
package urlrep

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/url"
	"regexp"
	"strings"
	"unicode"

	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"

	"github.com/mcp-extproc/mcp-extproc/pkg/builtin/jsonscan"
	"github.com/mcp-extproc/mcp-extproc/pkg/builtin/plugin"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// Spec describes the plugin.
func Spec() plugin.Spec {
	return plugin.Spec{
		Name: "url_reputation",
		Kinds: []string{
			"plugins.url_reputation.url_reputation.URLReputationPlugin",
			"cpex_url_reputation.URLReputationPlugin",
			"cpex_url_reputation.url_reputation.URLReputationPlugin",
		},
		Hooks: []cpex.HookType{cpex.ResourcePreFetch},
		Keys:  keys,
		New:   New,
	}
}

var keys = []plugin.Key{
	{Name: "whitelist_domains", Supported: true, Note: "domains (and their subdomains) that pass every other check"},
	{Name: "allowed_patterns", Supported: true, Note: "regular expressions (RE2) on the trimmed URL that pass every other check, https included"},
	{Name: "blocked_domains", Supported: true, Note: "domains (and their subdomains) refused"},
	{Name: "blocked_patterns", Supported: true, Note: "regular expressions (RE2) on the trimmed URL refused"},
	{Name: "use_heuristic_check", Supported: true, Note: "entropy, top-level domain and Unicode script checks for non-IP hosts (default false)"},
	{Name: "entropy_threshold", Supported: true, Note: "largest Shannon entropy of a domain of 8 bytes or more (default 3.65)"},
	{Name: "block_non_secure_http", Supported: true, Note: "refuse any scheme but https (default true)"},
}

type config struct {
	WhitelistDomains   []string `json:"whitelist_domains"`
	AllowedPatterns    []string `json:"allowed_patterns"`
	BlockedDomains     []string `json:"blocked_domains"`
	BlockedPatterns    []string `json:"blocked_patterns"`
	UseHeuristicCheck  bool     `json:"use_heuristic_check"`
	EntropyThreshold   *float64 `json:"entropy_threshold"`
	BlockNonSecureHTTP *bool    `json:"block_non_secure_http"`
}

// Plugin is a configured URL check.
type Plugin struct {
	allowDomains, blockDomains []string // lower case
	allowRes, blockRes         []*regexp.Regexp
	heuristics                 bool
	entropy                    float64
	httpsOnly                  bool
	decs                       jsonscan.Decoders
}

// New builds the check from its config: block.
func New(cfg map[string]any) (plugin.Plugin, []plugin.Issue, error) {
	var c config
	issues := plugin.Decode(cfg, &c, keys)
	p := &Plugin{heuristics: c.UseHeuristicCheck, entropy: 3.65, httpsOnly: true}
	if c.EntropyThreshold != nil {
		p.entropy = *c.EntropyThreshold
	}
	if c.BlockNonSecureHTTP != nil {
		p.httpsOnly = *c.BlockNonSecureHTTP
	}
	lower := func(in []string) []string {
		out := make([]string, len(in))
		for i, d := range in {
			out[i] = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(d)), ".")
		}
		return out
	}
	p.allowDomains, p.blockDomains = lower(c.WhitelistDomains), lower(c.BlockedDomains)
	compile := func(key string, in []string) []*regexp.Regexp {
		var out []*regexp.Regexp
		for i, s := range in {
			re, err := regexp.Compile(s)
			if err != nil {
				issues = append(issues, plugin.Problem(fmt.Sprintf("%s[%d]", key, i), fmt.Sprintf("not an RE2 regular expression: %v", err)))
				continue
			}
			out = append(out, re)
		}
		return out
	}
	p.allowRes, p.blockRes = compile("allowed_patterns", c.AllowedPatterns), compile("blocked_patterns", c.BlockedPatterns)
	if err := plugin.Err(issues); err != nil {
		return nil, issues, err
	}
	return p, issues, nil
}

// Invoke implements plugin.Plugin.
func (p *Plugin) Invoke(_ context.Context, hook cpex.HookType, payload json.RawMessage, _ *cpex.PluginContext) (*cpex.PluginResult, error) {
	if hook != cpex.ResourcePreFetch {
		return nil, nil
	}
	uri, _, err := p.decs.Member(payload, "uri")
	if err != nil {
		return nil, fmt.Errorf("url_reputation: %w", err)
	}
	if v := p.Check(uri); v != nil {
		return plugin.Block(v), nil
	}
	return nil, nil
}

func block(reason, description, key, value string) *cpex.PluginViolation {
	return &cpex.PluginViolation{Reason: reason, Description: description, Code: "URL_REPUTATION_BLOCK", Details: map[string]any{key: value}}
}

// Check returns the violation of a URL, or nil when it passes, in
// cpex-plugins' order: parse, allow lists, https, blocked domains,
// blocked patterns, heuristics.
func (p *Plugin) Check(raw string) *cpex.PluginViolation {
	trimmed := strings.TrimSpace(raw)
	u, err := url.Parse(trimmed)
	if err != nil || u.Scheme == "" {
		return block("Could not parse url", fmt.Sprintf("URL %s is blocked", raw), "url", raw)
	}
	domain := strings.ToLower(u.Hostname())
	if domain == "" {
		return block("Could not parse domain", fmt.Sprintf("URL %s is blocked", raw), "url", raw)
	}
	if inDomains(domain, p.allowDomains) {
		return nil
	}
	for _, re := range p.allowRes {
		if re.MatchString(trimmed) {
			return nil
		}
	}
	if p.httpsOnly && strings.ToLower(u.Scheme) != "https" {
		return block("Blocked non secure http url", fmt.Sprintf("URL %s is blocked", raw), "url", raw)
	}
	if inDomains(domain, p.blockDomains) {
		return block("Domain in blocked set", fmt.Sprintf("Domain '%s' in blocked set", domain), "domain", domain)
	}
	for _, re := range p.blockRes {
		if re.MatchString(trimmed) {
			return block("Blocked pattern", "URL matches blocked pattern", "url", raw)
		}
	}
	if !p.heuristics || net.ParseIP(domain) != nil {
		return nil
	}
	switch {
	case len(domain) >= 8 && entropy(domain) > p.entropy:
		return block("High entropy domain", fmt.Sprintf("Domain exceeds entropy threshold: %s", domain), "domain", domain)
	case !icannTLD(domain):
		return block("Illegal TLD", fmt.Sprintf("Domain TLD not legal: %s", domain), "domain", domain)
	case !unicodeSecure(domain):
		return block("Domain unicode is not secure", fmt.Sprintf("Domain unicode is not secure for domain: %s", domain), "domain", domain)
	}
	return nil
}

// inDomains reports whether domain or one of its parents is in list.
func inDomains(domain string, list []string) bool {
	for _, d := range list {
		if domain == d || strings.HasSuffix(domain, "."+d) {
			return true
		}
	}
	return false
}

// entropy is the Shannon entropy of the bytes of s, in bits.
func entropy(s string) float64 {
	var freq [256]int
	for i := 0; i < len(s); i++ {
		freq[s[i]]++
	}
	e := 0.0
	for _, n := range freq {
		if n > 0 {
			q := float64(n) / float64(len(s))
			e -= q * math.Log2(q)
		}
	}
	return e
}

// icannTLD reports whether the last label of domain is a top-level domain
// of the ICANN section of the public suffix list (cpex-plugins compiles in
// IANA's list; the two agree on delegated TLDs).
func icannTLD(domain string) bool {
	tld := domain[strings.LastIndexByte(domain, '.')+1:]
	if a, err := idna.ToASCII(tld); err == nil {
		tld = a
	}
	suffix, icann := publicsuffix.PublicSuffix(tld)
	return icann && suffix == tld
}

// unicodeSecure applies UTS #39's spirit to each label of domain: only
// letters, digits and marks, and one script, or Latin with the Han-based
// combinations UTS #39 calls highly restrictive.
func unicodeSecure(domain string) bool {
	u, err := idna.ToUnicode(domain)
	if err != nil || len(u) > 253 {
		return false
	}
	for _, label := range strings.Split(u, ".") {
		label = strings.ReplaceAll(label, "-", "")
		if label == "" {
			return false
		}
		scripts := map[string]bool{}
		for _, r := range label {
			if !(unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r)) {
				return false
			}
			if s := scriptOf(r); s != "" {
				scripts[s] = true
			}
		}
		if len(scripts) > 1 && !highlyRestrictive(scripts) {
			return false
		}
	}
	return true
}

// scriptOf names the script of a letter ("" for Common and Inherited).
func scriptOf(r rune) string {
	if r < 0x80 {
		if unicode.IsLetter(r) {
			return "Latin"
		}
		return ""
	}
	for name, table := range unicode.Scripts {
		if name != "Common" && name != "Inherited" && unicode.Is(table, r) {
			return name
		}
	}
	return ""
}

func highlyRestrictive(scripts map[string]bool) bool {
	for _, allowed := range [][]string{
		{"Latin", "Han", "Hiragana", "Katakana"},
		{"Latin", "Han", "Bopomofo"},
		{"Latin", "Han", "Hangul"},
	} {
		ok := true
		for s := range scripts {
			found := false
			for _, a := range allowed {
				found = found || a == s
			}
			ok = ok && found
		}
		if ok {
			return true
		}
	}
	return false
}

// Close implements plugin.Plugin.
func (p *Plugin) Close() error { return nil }

// NonBlocking implements plugin.NonBlocking: Invoke only computes.
func (p *Plugin) NonBlocking() bool { return true }
