package config

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// validator collects the problems and warnings of the sections' checks
// (see [Config.CheckWith]).
type validator struct {
	opts     Options
	problems []Problem
	warnings []Problem
}

func (v *validator) problem(plugin, field, format string, args ...any) {
	v.problems = append(v.problems, Problem{Plugin: plugin, Field: field, Message: fmt.Sprintf(format, args...)})
}

func (v *validator) warn(plugin, field, format string, args ...any) {
	v.warnings = append(v.warnings, Problem{Plugin: plugin, Field: field, Message: fmt.Sprintf(format, args...)})
}

// file checks that a TLS file exists, is a regular file and can be read
// (unless the options skip files).
func (v *validator) file(label, field, path string) {
	if path == "" || v.opts.SkipFiles {
		return
	}
	f, err := os.Open(path)
	if err != nil {
		v.problem(label, field, "cannot read %s: %v", path, unwrapPathError(err))
		return
	}
	defer f.Close()
	st, err := f.Stat()
	switch {
	case err != nil:
		v.problem(label, field, "cannot read %s: %v", path, unwrapPathError(err))
	case !st.Mode().IsRegular():
		v.problem(label, field, "%s is not a regular file", path)
	}
}

func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// quotedOr writes words as "a" or "b" (or "c").
func quotedOr(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = strconv.Quote(w)
	}
	return strings.Join(q, " or ")
}

// validHeaderName reports whether h is an HTTP field name (RFC 9110 token),
// or an HTTP/2 pseudo-header such as ":authority".
func validHeaderName(h string) bool {
	h = strings.TrimPrefix(h, ":")
	if h == "" {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			continue
		}
		if !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return true
}
