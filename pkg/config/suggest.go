package config

import (
	"fmt"
	"strings"

	"github.com/agnivade/levenshtein"
)

// closest returns the candidate nearest to w by edit distance (compared
// ignoring case), if it is near enough to be what w was meant to be: at
// most 1 edit for words of up to 4 letters, 2 up to 8, 3 beyond, and
// always fewer edits than half of w. Ties go to the earlier candidate; w
// itself is never suggested.
func closest(w string, candidates []string) (string, bool) {
	lw := strings.ToLower(strings.TrimSpace(w))
	if lw == "" {
		return "", false
	}
	limit := 3
	switch n := len([]rune(lw)); {
	case n <= 4:
		limit = 1
	case n <= 8:
		limit = 2
	}
	best, bestDist := "", limit+1
	for _, c := range candidates {
		lc := strings.ToLower(c)
		if lc == lw {
			return "", false // w is a candidate: nothing to suggest
		}
		if d := levenshtein.ComputeDistance(lw, lc); d < bestDist && 2*d < len([]rune(lw)) {
			best, bestDist = c, d
		}
	}
	return best, best != ""
}

// didYouMean returns `; did you mean "x"?` for the candidate closest to w,
// or "" when none is close.
func didYouMean(w string, candidates []string) string {
	if c, ok := closest(w, candidates); ok {
		return fmt.Sprintf("; did you mean %q?", c)
	}
	return ""
}

// words converts a list of string-like values for [didYouMean].
func words[T ~string](list ...T) []string {
	out := make([]string, len(list))
	for i, w := range list {
		out[i] = string(w)
	}
	return out
}
