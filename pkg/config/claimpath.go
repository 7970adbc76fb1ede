package config

import (
	"errors"
	"fmt"
	"strings"
)

// Bounds of a claim path.
const (
	MaxClaimPathBytes    = 256
	MaxClaimPathSegments = 16
)

// ParseClaimPath splits a claim path into the names it walks, outermost
// first. A path is names joined by dots (realm_access.roles); a name that
// holds a dot, a bracket, a quote or a space is written ["..."] with \" and
// \\ escapes, with or without a dot before it
// (["https://acme.example/roles"], resource_access["my-app"].roles).
func ParseClaimPath(p string) ([]string, error) {
	if p == "" {
		return nil, errors.New("empty claim path")
	}
	if len(p) > MaxClaimPathBytes {
		return nil, fmt.Errorf("claim path longer than %d bytes", MaxClaimPathBytes)
	}
	var out []string
	for i := 0; i < len(p); {
		if len(out) == MaxClaimPathSegments {
			return nil, fmt.Errorf("claim path %q: more than %d names", p, MaxClaimPathSegments)
		}
		if len(out) > 0 && p[i] == '.' {
			i++
			if i == len(p) {
				return nil, fmt.Errorf("claim path %q: ends with a dot", p)
			}
		}
		var name string
		var err error
		if p[i] == '[' {
			name, i, err = quotedName(p, i)
		} else {
			name, i, err = plainName(p, i)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, name)
		if i < len(p) && p[i] != '.' && p[i] != '[' {
			return nil, fmt.Errorf("claim path %q: unexpected %q at %d", p, p[i], i)
		}
	}
	return out, nil
}

// plainName reads a name up to the next dot or bracket.
func plainName(p string, i int) (string, int, error) {
	start := i
	for i < len(p) && p[i] != '.' && p[i] != '[' {
		if c := p[i]; c == ']' || c == '"' || c == '\\' || c <= ' ' || c == 0x7f {
			return "", 0, fmt.Errorf("claim path %q: %q at %d must be in a [\"...\"] name", p, c, i)
		}
		i++
	}
	if i == start {
		return "", 0, fmt.Errorf("claim path %q: empty name at %d", p, start)
	}
	return p[start:i], i, nil
}

// quotedName reads ["..."] starting at the bracket.
func quotedName(p string, i int) (string, int, error) {
	if i+1 >= len(p) || p[i+1] != '"' {
		return "", 0, fmt.Errorf("claim path %q: [ at %d must open [\"...\"]", p, i)
	}
	var b strings.Builder
	for j := i + 2; j < len(p); j++ {
		switch c := p[j]; c {
		case '\\':
			if j+1 == len(p) || (p[j+1] != '"' && p[j+1] != '\\') {
				return "", 0, fmt.Errorf("claim path %q: bad escape at %d (only \\\" and \\\\)", p, j)
			}
			j++
			b.WriteByte(p[j])
		case '"':
			if j+1 == len(p) || p[j+1] != ']' {
				return "", 0, fmt.Errorf("claim path %q: \" at %d must close with \"]", p, j)
			}
			if b.Len() == 0 {
				return "", 0, fmt.Errorf("claim path %q: empty name at %d", p, i)
			}
			return b.String(), j + 2, nil
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, fmt.Errorf("claim path %q: unterminated [\"...\"] at %d", p, i)
}
