package mcpmsg

import (
	"unicode"
	"unicode/utf8"
)

// foldRune maps r to a canonical member of its Unicode simple case folding
// orbit (the smallest rune in it), so that foldRune(a) == foldRune(b) exactly
// when a and b are equal ignoring case (including 'K' U+212A KELVIN SIGN and
// 'ſ' U+017F LATIN SMALL LETTER LONG S, which encoding/json v1 treats as 'k'
// and 's').
func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if 'a' <= r && r <= 'z' {
			return r - 'a' + 'A'
		}
		return r
	}
	m := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f < m {
			m = f
		}
	}
	return m
}

// foldEqual reports whether a and b are equal under Unicode case folding.
func foldEqual(a, b []byte) bool {
	for len(a) > 0 && len(b) > 0 {
		ca, cb := a[0], b[0]
		if ca|cb < utf8.RuneSelf {
			if ca != cb && foldRune(rune(ca)) != foldRune(rune(cb)) {
				return false
			}
			a, b = a[1:], b[1:]
			continue
		}
		ra, na := utf8.DecodeRune(a)
		rb, nb := utf8.DecodeRune(b)
		if ra != rb && foldRune(ra) != foldRune(rb) {
			return false
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) == 0 && len(b) == 0
}

// appendFold appends the case-folded form of name to dst.
func appendFold(dst, name []byte) []byte {
	for len(name) > 0 {
		r, n := utf8.DecodeRune(name)
		dst = utf8.AppendRune(dst, foldRune(r))
		name = name[n:]
	}
	return dst
}

// caseVariant returns the name in known that name equals only when case is
// ignored, or "". Servers that match names case-insensitively (Go's
// encoding/json v1, .NET web defaults) would read such a member as the known
// one, which this package would not see.
func caseVariant(name []byte, known ...string) string {
	for _, k := range known {
		if string(name) != k && foldEqual(name, []byte(k)) {
			return k
		}
	}
	return ""
}
