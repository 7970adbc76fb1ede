package config

import (
	"fmt"
	"strings"
)

// Problem is one finding about a configuration: an error when it is in
// [ValidationError.Problems], a note when it is in [Config.Warnings].
type Problem struct {
	// Plugin is the name of the plugin concerned, or "" for settings outside
	// a plugin and for plugins without a name (Field then starts with
	// "plugins[i]").
	Plugin string
	// Field is the path of the key concerned, relative to the plugin when
	// Plugin is set ("mcp.url", "conditions[0].tools"), else from the top
	// ("extproc.mcp_paths[1]"); "" for the file as a whole.
	Field string
	// Message says what is wrong, and how to fix it where that is not obvious.
	Message string
	// Line and Column locate the problem in the file (1-based; 0: unknown,
	// or a config built in code). Column is set for YAML syntax errors only.
	Line, Column int
}

// String formats p as `line 12: plugin "pii": mcp.url: must be an http(s)
// URL` (without "line N: " when the line is unknown).
func (p Problem) String() string {
	switch {
	case p.Line > 0 && p.Column > 0:
		return fmt.Sprintf("line %d, column %d: %s", p.Line, p.Column, p.Text())
	case p.Line > 0:
		return fmt.Sprintf("line %d: %s", p.Line, p.Text())
	}
	return p.Text()
}

// Text formats p without its position, as `plugin "pii": mcp.url: must be
// an http(s) URL`, for callers that print the position their own way
// (file:line:column).
func (p Problem) Text() string {
	var b strings.Builder
	if p.Plugin != "" {
		fmt.Fprintf(&b, "plugin %q: ", p.Plugin)
	}
	if p.Field != "" {
		b.WriteString(p.Field)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// ValidationError is the error of [Load], [Parse] and [Config.Validate]
// callers: every problem found, not just the first.
type ValidationError struct {
	Problems []Problem
	// Warnings found while loading, kept so a caller that refuses the file
	// can still show them.
	Warnings []Problem
}

// Error joins the problems, one per line.
func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// joinPath appends a key to a field path.
func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
