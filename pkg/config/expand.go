package config

import (
	"errors"
	"fmt"
	"strings"
)

// Environment references, two syntaxes (both stdlib-only, no template engine):
//
//   - ${VAR}, ${VAR:-default} (default when VAR is unset or empty) and
//     ${VAR-default} (default when VAR is unset) are expanded inside YAML
//     scalar values, after parsing, so a value can never change the YAML
//     structure and comments are never expanded. A plain (unquoted) scalar is
//     re-typed after expansion, so "priority: ${PRIO:-10}" is an integer.
//     "$$" before "{" escapes: "$${X}" is the literal "${X}". A "$" not
//     followed by "{" is left alone, so regular expressions survive.
//   - {{ env.VAR }}, {{ env['VAR'] }} and {{ env.VAR | default('x') }}, the
//     Jinja references the Python loader renders, are substituted in the text
//     before parsing, as Python does. Any other {{ ... }} is left verbatim
//     (the Python loader uses DebugUndefined for the same effect); Jinja
//     expressions on env that this subset does not understand are reported
//     with their line. Unlike Python, values are not HTML-escaped.

// errUnset reports a reference to an unset variable without a default.
var errUnset = errors.New("is not set (give a default: ${VAR:-default})")

// expandVars expands ${...} references in s.
func expandVars(s string, getenv func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "$${"):
			b.WriteString("${")
			i += 3
		case strings.HasPrefix(s[i:], "${"):
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return "", fmt.Errorf("unterminated %q", s[i:])
			}
			ref := s[i+2 : i+2+end]
			v, err := lookupRef(ref, getenv)
			if err != nil {
				return "", err
			}
			b.WriteString(v)
			i += 2 + end + 1
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String(), nil
}

// lookupRef resolves the inside of ${...}.
func lookupRef(ref string, getenv func(string) (string, bool)) (string, error) {
	n := 0
	for n < len(ref) && isNameByte(ref[n], n == 0) {
		n++
	}
	name, rest := ref[:n], ref[n:]
	if name == "" {
		return "", fmt.Errorf("bad reference ${%s}: want ${VAR} or ${VAR:-default}", ref)
	}
	v, ok := getenv(name)
	switch {
	case rest == "":
		if !ok {
			return "", fmt.Errorf("environment variable %s %w", name, errUnset)
		}
		return v, nil
	case strings.HasPrefix(rest, ":-"):
		if !ok || v == "" {
			return rest[2:], nil
		}
		return v, nil
	case strings.HasPrefix(rest, "-"):
		if !ok {
			return rest[1:], nil
		}
		return v, nil
	}
	return "", fmt.Errorf("bad reference ${%s}: only ${VAR}, ${VAR:-default} and ${VAR-default} are supported", ref)
}

func isNameByte(c byte, first bool) bool {
	switch {
	case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		return true
	case '0' <= c && c <= '9':
		return !first
	}
	return false
}

// expandJinja substitutes {{ env... }} references in the raw text.
func expandJinja(text string, getenv func(string) (string, bool)) (string, []Problem) {
	if !strings.Contains(text, "{{") {
		return text, nil
	}
	var (
		b        strings.Builder
		problems []Problem
	)
	b.Grow(len(text))
	for i := 0; i < len(text); {
		start := strings.Index(text[i:], "{{")
		if start < 0 {
			b.WriteString(text[i:])
			break
		}
		start += i
		b.WriteString(text[i:start])
		end := strings.Index(text[start+2:], "}}")
		if end < 0 {
			b.WriteString(text[start:])
			break
		}
		end += start + 2 + 2 // index after "}}"
		expr := text[start:end]
		inner := strings.TrimSpace(strings.Trim(strings.TrimSpace(expr[2:len(expr)-2]), "-"))
		if !isEnvExpr(inner) {
			b.WriteString(expr) // not ours: left verbatim, as DebugUndefined does
			i = end
			continue
		}
		line := 1 + strings.Count(text[:start], "\n")
		v, err := evalEnvExpr(inner, getenv)
		switch {
		case err == nil:
			b.WriteString(v)
		case inComment(text, start):
			b.WriteString(expr)
		default:
			problems = append(problems, Problem{Message: fmt.Sprintf("%s: %v", expr, err), Line: line})
			b.WriteString(expr)
		}
		i = end
	}
	return b.String(), problems
}

// isEnvExpr reports whether a Jinja expression refers to env.
func isEnvExpr(inner string) bool {
	if !strings.HasPrefix(inner, "env") {
		return false
	}
	rest := strings.TrimLeft(inner[3:], " \t")
	return rest == "" || rest[0] == '.' || rest[0] == '[' || rest[0] == '|'
}

// evalEnvExpr evaluates env.NAME, env['NAME'] or env["NAME"], optionally
// followed by "| default('x')" (or "| d('x')").
func evalEnvExpr(inner string, getenv func(string) (string, bool)) (string, error) {
	rest := strings.TrimSpace(inner[len("env"):])
	var name string
	switch {
	case strings.HasPrefix(rest, "."):
		rest = rest[1:]
		n := 0
		for n < len(rest) && isNameByte(rest[n], n == 0) {
			n++
		}
		name, rest = rest[:n], rest[n:]
	case strings.HasPrefix(rest, "["):
		body := strings.TrimSpace(rest[1:])
		lit, after, ok := quoted(body)
		after = strings.TrimSpace(after)
		if !ok || !strings.HasPrefix(after, "]") {
			return "", errors.New("unsupported Jinja expression: use {{ env.VAR }} or ${VAR}")
		}
		name, rest = lit, after[1:]
	}
	if name == "" {
		return "", errors.New("unsupported Jinja expression: use {{ env.VAR }} or ${VAR}")
	}
	rest = strings.TrimSpace(rest)
	v, ok := getenv(name)
	if rest == "" {
		if !ok {
			return "", fmt.Errorf("environment variable %s is not set", name)
		}
		return v, nil
	}
	def, ok2 := parseDefaultFilter(rest)
	if !ok2 {
		return "", errors.New("unsupported Jinja expression: only {{ env.VAR }} and {{ env.VAR | default('x') }} are understood; or use ${VAR:-x}")
	}
	if !ok {
		return def, nil
	}
	return v, nil
}

// parseDefaultFilter parses "| default('x')" or "| d("x")".
func parseDefaultFilter(s string) (string, bool) {
	s, ok := strings.CutPrefix(s, "|")
	if !ok {
		return "", false
	}
	s = strings.TrimSpace(s)
	switch {
	case strings.HasPrefix(s, "default("):
		s = s[len("default("):]
	case strings.HasPrefix(s, "d("):
		s = s[len("d("):]
	default:
		return "", false
	}
	lit, after, ok := quoted(strings.TrimSpace(s))
	if !ok || strings.TrimSpace(after) != ")" {
		return "", false
	}
	return lit, true
}

// quoted splits a leading '...' or "..." literal (no escapes) off s.
func quoted(s string) (lit, rest string, ok bool) {
	if s == "" || (s[0] != '\'' && s[0] != '"') {
		return "", s, false
	}
	end := strings.IndexByte(s[1:], s[0])
	if end < 0 {
		return "", s, false
	}
	return s[1 : 1+end], s[2+end:], true
}

// inComment reports whether offset pos of text lies in a YAML comment: a
// "#" earlier on the same line, at the line start or after a blank, outside
// quotes. Quote tracking is approximate (good for config files).
func inComment(text string, pos int) bool {
	lineStart := strings.LastIndexByte(text[:pos], '\n') + 1
	var quote byte
	for i := lineStart; i < pos; i++ {
		c := text[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && (i == lineStart || text[i-1] == ' ' || text[i-1] == '\t'):
			return true
		}
	}
	return false
}
