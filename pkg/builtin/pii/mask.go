package pii

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode/utf8"
)

// Strategy is a masking strategy.
type Strategy string

// The masking strategies cpex-plugins' pii_filter documents.
const (
	Redact   Strategy = "redact"   // the redaction text
	Partial  Strategy = "partial"  // keep the last digits, or the first and last characters
	Hash     Strategy = "hash"     // [HASH:<16 hex of a salted SHA-256>]
	Tokenize Strategy = "tokenize" // [TOKEN:<8 random hex>]
	Remove   Strategy = "remove"   // nothing
)

func (s Strategy) valid() bool {
	switch s {
	case Redact, Partial, Hash, Tokenize, Remove:
		return true
	}
	return false
}

// masker applies strategies with the config's redaction text and salt.
type masker struct {
	redaction string
	salt      string // per plugin instance, as cpex-plugins makes one per detector
}

func (m *masker) mask(value string, t Type, s Strategy) string {
	switch s {
	case Redact:
		return m.redaction
	case Partial:
		return partial(value, t)
	case Hash:
		sum := sha256.Sum256([]byte(m.salt + ":" + value))
		return "[HASH:" + hex.EncodeToString(sum[:8]) + "]"
	case Tokenize:
		var b [4]byte
		_, _ = rand.Read(b[:])
		return "[TOKEN:" + hex.EncodeToString(b[:]) + "]"
	case Remove:
		return ""
	}
	return m.redaction
}

func lastDigits(v string, k int) (string, bool) {
	var d []byte
	for i := 0; i < len(v); i++ {
		if '0' <= v[i] && v[i] <= '9' {
			d = append(d, v[i])
		}
	}
	if len(d) < k {
		return "", false
	}
	return string(d[len(d)-k:]), true
}

// partial is the partial mask of each type (cpex-plugins' pii_filter).
func partial(v string, t Type) string {
	switch t {
	case SSN:
		if len(v) >= 4 {
			return "***-**-" + v[len(v)-4:]
		}
		return "***-**-****"
	case BSN:
		if len(v) >= 4 {
			return "*****" + v[len(v)-4:]
		}
		return "[REDACTED]"
	case CreditCard:
		if l, ok := lastDigits(v, 4); ok {
			return "****-****-****-" + l
		}
		return "****-****-****-****"
	case Email:
		at := strings.IndexByte(v, '@')
		if at < 0 {
			return "[REDACTED]"
		}
		local, domain := v[:at], v[at:]
		if len(local) > 2 {
			return local[:1] + "***" + local[len(local)-1:] + domain
		}
		return "***" + domain
	case Phone:
		if l, ok := lastDigits(v, 4); ok {
			return "***-***-" + l
		}
		return "***-***-****"
	case BankAccount:
		if len(v) >= 6 && strings.ContainsAny(strings.ToLower(v), "abcdefghijklmnopqrstuvwxyz") {
			return v[:2] + strings.Repeat("*", len(v)-6) + v[len(v)-4:]
		}
		return "[REDACTED]"
	}
	n := utf8.RuneCountInString(v)
	switch {
	case n > 2:
		first, _ := utf8.DecodeRuneInString(v)
		last, _ := utf8.DecodeLastRuneInString(v)
		return string(first) + strings.Repeat("*", n-2) + string(last)
	case n == 2:
		first, _ := utf8.DecodeRuneInString(v)
		return string(first) + "*"
	}
	return "*"
}
