package pii

import (
	"bytes"
	"regexp"
	"sort"
	"strings"
)

// Type is a kind of PII, named as cpex-plugins names it.
type Type string

// The detector types.
const (
	SSN           Type = "ssn"
	BSN           Type = "bsn"
	CreditCard    Type = "credit_card"
	Email         Type = "email"
	Phone         Type = "phone"
	IPAddress     Type = "ip_address"
	DateOfBirth   Type = "date_of_birth"
	Passport      Type = "passport"
	DriverLicense Type = "driver_license"
	BankAccount   Type = "bank_account"
	MedicalRecord Type = "medical_record"
	AWSKey        Type = "aws_key"
	APIKey        Type = "api_key"
	Custom        Type = "custom"
)

// rule is one compiled detector pattern.
type rule struct {
	typ      Type
	re       *regexp.Regexp
	strategy Strategy // "" : the default strategy
	// keywords, when set, are lower-case words one of which starts a word
	// of every match: the pattern only runs near them.
	keywords []string
}

// The built-in patterns, as cpex-plugins' pii_filter documents them
// (all case-insensitive). Those of the numeric detectors only hold digits,
// whitespace and -./()+, which is what lets them run on the digit clusters
// of a text alone.
const (
	ssnArea    = `(?:00[1-9]|0[1-9][0-9]|[1-5][0-9]{2}|6(?:[0-5][0-9]|6[0-57-9]|[7-9][0-9])|[7-8][0-9]{2})`
	ssnGroup   = `(?:0[1-9]|[1-9][0-9])`
	ssnSerial  = `(?:000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})`
	reSSN      = `\b` + ssnArea + `-` + ssnGroup + `-` + ssnSerial + `\b`
	reSSNLabel = `\b(?:SSN|Social\s+Security(?:\s+Number)?)[:\s#-]*` + ssnArea + ssnGroup + ssnSerial + `\b`
	reCard     = `\b(?:\d[-\s]?){12,18}\d\b`
	reEmail    = `\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Z|a-z]{2,}\b`
	rePhoneUS  = `\b(?:\+?1[-.\s]?)?\(?\d{3}\)?[-.\s]?\d{3}[-.\s]?\d{4}\b`
	rePhoneInt = `\+[1-9]\d{9,14}\b`
	reIPv4     = `\b(?:(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\.){3}(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\b`
	reIPv6     = `\b(?:[A-Fa-f0-9]{1,4}:){7}[A-Fa-f0-9]{1,4}\b`
	reDate     = `\b(?:0[1-9]|1[0-2])[-/](?:0[1-9]|[12]\d|3[01])[-/](?:19|20)\d{2}\b`
	reDOBLabel = `\b(?:DOB|Date of Birth|Born|Birthday)[:\s]+\d{1,2}[-/]\d{1,2}[-/]\d{2,4}\b`
	reBSN1     = `\b(?:BSN|Citizen\s+ID|Citizen\s+Service\s+Number|Burgerservicenummer)[:\s#]*\d{9}\b`
	reBSN2     = `\b(?:My\s+)?BSN\s+(?:is\s+)?\d{9}\b`
	rePassport = `\b(?:Passport\s+Number|Passport\s+No|Passport)[#:\s-]+[A-Z0-9]{6,9}\b`
	reDL       = `\b(?:DL|License|Driver'?s? License)[#:\s]+[A-Z0-9]{5,20}\b`
	reBank     = `\b(?:Account|Acct|Bank\s+Account|Account\s+Number|Routing\s+Account)[#:\s-]*\d{8,17}\b`
	reIBAN     = `\b[A-Z]{2}\d{2}[A-Z0-9]{4}\d{7}(?:\d{3})?\b`
	reMRN      = `\b(?:MRN|Medical Record)[#:\s]+[A-Z0-9]{6,12}\b`
	reAWSKey   = `\bAKIA[0-9A-Z]{16}\b`
	reAPIKey   = `\b(?:api[_-]?key|apikey|api_token|access[_-]?token)[:\s]+['"]?[A-Za-z0-9\-_]{20,}['"]?\b`
)

// keyword is one label word of a labeled rule.
type keyword struct {
	word string
	rule int
}

// trigger is a label found in a text: its rule runs around it.
type trigger struct{ at, rule, n int }

// match is one detection in a string.
type match struct {
	start, end int
	rule       int // index in detector.rules
}

// detector finds PII in strings. It is built once per config.
type detector struct {
	rules   []rule
	cluster []int // rules run on the digit clusters of a text
	email   int   // -1: off
	ipv6    int
	iban    int
	labeled []int // rules with keywords
	// byLetter indexes the keywords of the labeled rules by first letter.
	byLetter  [26][]keyword
	whole     []int // rules run on the whole text (custom patterns)
	whitelist []*regexp.Regexp
}

func mustRule(typ Type, pattern string, keywords ...string) rule {
	return rule{typ: typ, re: regexp.MustCompile(`(?i)` + pattern), keywords: keywords}
}

// newDetector compiles the detectors that on enables, then the custom
// patterns (already checked) and the whitelist.
func newDetector(on map[Type]bool, custom []rule, whitelist []*regexp.Regexp) *detector {
	d := &detector{email: -1, ipv6: -1, iban: -1, whitelist: whitelist}
	add := func(r rule) int {
		d.rules = append(d.rules, r)
		return len(d.rules) - 1
	}
	clusterRule := func(typ Type, pattern string) {
		if on[typ] {
			d.cluster = append(d.cluster, add(mustRule(typ, pattern)))
		}
	}
	labeledRule := func(typ Type, pattern string, keywords ...string) {
		if on[typ] {
			d.labeled = append(d.labeled, add(mustRule(typ, pattern, keywords...)))
		}
	}
	// Order matters only between equal candidates (same start and end):
	// the type name decides, then this order, as in cpex-plugins.
	labeledRule(BSN, reBSN1, "bsn", "citizen", "burgerservicenummer")
	labeledRule(BSN, reBSN2, "bsn")
	clusterRule(SSN, reSSN)
	labeledRule(SSN, reSSNLabel, "ssn", "social")
	clusterRule(CreditCard, reCard)
	if on[Email] {
		d.email = add(mustRule(Email, reEmail))
	}
	clusterRule(Phone, rePhoneUS)
	clusterRule(Phone, rePhoneInt)
	clusterRule(IPAddress, reIPv4)
	if on[IPAddress] {
		d.ipv6 = add(mustRule(IPAddress, reIPv6))
	}
	labeledRule(DateOfBirth, reDOBLabel, "dob", "birth", "born")
	clusterRule(DateOfBirth, reDate)
	labeledRule(Passport, rePassport, "passport")
	labeledRule(DriverLicense, reDL, "dl", "license", "driver")
	labeledRule(BankAccount, reBank, "account", "acct")
	if on[BankAccount] {
		d.iban = add(mustRule(BankAccount, reIBAN))
	}
	labeledRule(MedicalRecord, reMRN, "mrn", "medical")
	labeledRule(AWSKey, reAWSKey, "akia")
	labeledRule(APIKey, reAPIKey, "api", "access")
	for _, r := range custom {
		d.whole = append(d.whole, add(r))
	}
	for _, ri := range d.labeled {
		for _, w := range d.rules[ri].keywords {
			d.byLetter[w[0]-'a'] = append(d.byLetter[w[0]-'a'], keyword{word: w, rule: ri})
		}
	}
	return d
}

// Byte classes of the one pass over a text.
const (
	clDigit   = 1 << iota // 0-9
	clCluster             // digits, whitespace and -./()+: the characters of the numeric patterns
	clWord                // [0-9A-Za-z_]: \b
	clLocal               // e-mail local part [A-Za-z0-9._%+-]
	clDomain              // e-mail domain [A-Za-z0-9.-]
)

// classes is the table of the byte classes (built by classTable).
type classes [256]uint8

func classTable() *classes {
	var c classes
	for b := 0; b < 256; b++ {
		ch := byte(b)
		alnum := '0' <= ch && ch <= '9' || 'a' <= ch && ch <= 'z' || 'A' <= ch && ch <= 'Z'
		if '0' <= ch && ch <= '9' {
			c[b] |= clDigit | clCluster
		}
		if bytes.IndexByte([]byte(" \t\n\r\f\v-./()+"), ch) >= 0 {
			c[b] |= clCluster
		}
		if alnum || ch == '_' {
			c[b] |= clWord
		}
		if alnum || bytes.IndexByte([]byte("._%+-"), ch) >= 0 {
			c[b] |= clLocal
		}
		if alnum || ch == '.' || ch == '-' {
			c[b] |= clDomain
		}
	}
	return &c
}

// scratch holds per-call buffers, pooled by the plugin.
type scratch struct {
	triggers []trigger
	matches  []match
}

// find returns the detections in s, earliest first, without overlaps:
// where candidates overlap the earliest wins, then the longest.
func (d *detector) find(s string, cl *classes, sc *scratch) []match {
	cand := d.candidates(s, cl, sc)
	// Whitelist, structural checks, duplicates from overlapping windows.
	kept := cand[:0]
	for _, m := range cand {
		v := s[m.start:m.end]
		if d.whitelisted(v) || !valid(d.rules[m.rule].typ, v) {
			continue
		}
		kept = append(kept, m)
	}
	sort.SliceStable(kept, func(a, b int) bool {
		ma, mb := kept[a], kept[b]
		if ma.start != mb.start {
			return ma.start < mb.start
		}
		if ma.end != mb.end {
			return ma.end > mb.end
		}
		ta, tb := d.rules[ma.rule].typ, d.rules[mb.rule].typ
		if ta != tb {
			return ta < tb
		}
		return ma.rule < mb.rule
	})
	out := kept[:0]
	last := 0
	for _, m := range kept {
		if m.start < last {
			continue
		}
		last = m.end
		out = append(out, m)
	}
	sc.matches = out
	return out
}

func (d *detector) whitelisted(v string) bool {
	for _, w := range d.whitelist {
		if w.MatchString(v) {
			return true
		}
	}
	return false
}

// valid applies the checks the patterns cannot express: an SSN's area,
// group and serial (the patterns hold them already; kept for the labeled
// form's digits), a card's Luhn sum and issuer prefix.
func valid(t Type, v string) bool {
	switch t {
	case SSN:
		var d []byte
		for i := 0; i < len(v); i++ {
			if '0' <= v[i] && v[i] <= '9' {
				d = append(d, v[i])
			}
		}
		if len(d) != 9 {
			return false
		}
		area, group, serial := string(d[:3]), string(d[3:5]), string(d[5:])
		return area != "000" && area != "666" && area < "900" && group != "00" && serial != "0000"
	case CreditCard:
		return luhn(v)
	}
	return true
}

// luhn reports whether the digits of v are 13 to 19 long, pass the Luhn
// check and start with a known card issuer prefix.
func luhn(v string) bool {
	var d []byte
	for i := 0; i < len(v); i++ {
		if '0' <= v[i] && v[i] <= '9' {
			d = append(d, v[i]-'0')
		}
	}
	if len(d) < 13 || len(d) > 19 {
		return false
	}
	sum, parity := 0, len(d)%2
	for i, x := range d {
		if i%2 == parity {
			x *= 2
			if x > 9 {
				x -= 9
			}
		}
		sum += int(x)
	}
	return sum%10 == 0 && cardPrefix(d)
}

func cardPrefix(d []byte) bool {
	n := len(d)
	num := func(k int) int {
		v := 0
		for _, x := range d[:k] {
			v = v*10 + int(x)
		}
		return v
	}
	p1, p2, p3, p4 := num(1), num(2), num(3), num(4)
	switch {
	case p1 == 4 && (n == 13 || n == 16 || n == 19): // Visa
	case (p2 == 34 || p2 == 37) && n == 15: // American Express
	case p4 == 6011 && (n == 16 || n == 19), p2 == 65 && (n == 16 || n == 19): // Discover
	case p2 == 62 && n >= 16: // UnionPay
	case p2 == 67 && n >= 12: // Maestro
	case (p2 == 36 || p2 == 38 || p2 == 39) && n == 14, p3 >= 300 && p3 <= 305 && n == 14: // Diners Club
	case p2 >= 51 && p2 <= 55 && n == 16, p4 >= 2221 && p4 <= 2720 && n == 16: // Mastercard
	case p4 >= 3528 && p4 <= 3589 && n == 16: // JCB
	default:
		return false
	}
	return true
}

// candidates returns every match of every pattern that can apply to s,
// before the whitelist, the structural checks and overlap resolution.
func (d *detector) candidates(s string, cl *classes, sc *scratch) []match {
	cand, _ := d.pass(s, cl, sc, false)
	return cand
}

// mayMatch reports whether any pattern can match in s: false only when
// the pass that finds the candidates would run no pattern at all (no
// digit cluster, no '@', no label, too few colons after a hex digit, no
// custom pattern). It stops at the first pattern it would run and runs
// none.
func (d *detector) mayMatch(s string, cl *classes) bool {
	_, would := d.pass(s, cl, nil, true)
	return would
}

// pass is the one pass over s behind candidates and mayMatch: it runs the
// patterns where they can apply, or with probe set reports at the first
// one it would run (would) and returns. One pass for both keeps the
// prefilter from ever drifting from what the patterns need.
func (d *detector) pass(s string, cl *classes, sc *scratch, probe bool) (cand []match, would bool) {
	var triggers []trigger
	if !probe {
		cand, triggers = sc.matches[:0], sc.triggers[:0]
	}
	// run runs rule ri on s[from:to]; it reports true when probing.
	run := func(ri int, from, to int) bool {
		if probe {
			return true
		}
		for _, loc := range d.rules[ri].re.FindAllStringIndex(s[from:to], -1) {
			cand = append(cand, match{start: from + loc[0], end: from + loc[1], rule: ri})
		}
		return false
	}
	n := len(s)
	hexColons := 0 // colons after a hex digit: an IPv6 address has 7
	// One pass: digit clusters, e-mail candidates, IBAN-sized words.
	for i := 0; i < n; {
		c := cl[s[i]]
		switch {
		case c&clCluster != 0:
			j, digits := i, false
			for j < n && cl[s[j]]&clCluster != 0 {
				digits = digits || cl[s[j]]&clDigit != 0
				j++
			}
			if digits && len(d.cluster) > 0 {
				from, to := max(i-1, 0), min(j+1, n)
				for _, ri := range d.cluster {
					if run(ri, from, to) {
						return nil, true
					}
				}
			}
			i = j
		case s[i] == '@':
			if d.email >= 0 {
				from, to := i, i+1
				for from > 0 && cl[s[from-1]]&clLocal != 0 {
					from--
				}
				for to < n && cl[s[to]]&clDomain != 0 {
					to++
				}
				if run(d.email, max(from-1, 0), min(to+1, n)) {
					return nil, true
				}
			}
			i++
		case c&clWord != 0:
			j := i
			for j < n && cl[s[j]]&clWord != 0 {
				j++
			}
			if d.iban >= 0 && (j-i == 15 || j-i == 18) {
				if run(d.iban, max(i-1, 0), min(j+1, n)) {
					return nil, true
				}
			}
			if l := s[i] | 0x20; 'a' <= l && l <= 'z' {
				for _, k := range d.byLetter[l-'a'] {
					if j-i >= len(k.word) && strings.EqualFold(s[i:i+len(k.word)], k.word) {
						if probe {
							return nil, true
						}
						triggers = append(triggers, trigger{at: i, rule: k.rule, n: len(k.word)})
					}
				}
			}
			i = j
		default:
			if s[i] == ':' && i > 0 && isHex(s[i-1]) {
				hexColons++
			}
			i++
		}
	}
	if d.ipv6 >= 0 && hexColons >= 7 {
		if run(d.ipv6, 0, n) {
			return nil, true
		}
	}
	for _, tr := range triggers {
		// The label starts at most a few words before the keyword ("My
		// BSN", "Date of Birth") and the value follows it closely.
		from, to := max(tr.at-16, 0), min(tr.at+tr.n+96, n)
		for from > 0 && cl[s[from-1]]&clWord != 0 {
			from--
		}
		for to < n && cl[s[to]]&clWord != 0 {
			to++
		}
		run(tr.rule, from, to)
	}
	for _, ri := range d.whole {
		if run(ri, 0, n) {
			return nil, true
		}
	}
	if !probe {
		sc.triggers, sc.matches = triggers[:0], cand
	}
	return cand, false
}

func isHex(b byte) bool {
	return '0' <= b && b <= '9' || 'a' <= b|0x20 && b|0x20 <= 'f'
}
