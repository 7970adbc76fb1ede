package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v4"
)

// Options change what [LoadWith] and [ParseWith] check.
type Options struct {
	// SkipFiles leaves the files a config names unopened (the TLS certfile,
	// keyfile and ca_bundle of every transport), so a config can be checked
	// away from the machine or Pod it runs in. Everything else is checked as
	// usual, including the presence of those paths where they are required.
	SkipFiles bool
}

// Load reads the file at path and returns it parsed, expanded, defaulted and
// validated (see [Parse]), with the process environment. A file that cannot
// be read gives the wrapped os error; any other failure is a
// [*ValidationError] listing every problem.
func Load(path string) (*Config, error) { return LoadWith(path, Options{}) }

// LoadWith is [Load] with options.
func LoadWith(path string, o Options) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	return ParseWith(data, os.LookupEnv, o)
}

// Parse turns a configuration file into a [Config]: environment references
// are expanded with getenv (nil: none are set), the YAML is decoded,
// [Config.ApplyDefaults] runs, then [Config.Check]. Unknown keys and other
// notes go to Config.Warnings. On any problem Parse returns a
// [*ValidationError] listing all of them, and no Config. Every problem and
// warning carries the line of the key it concerns.
func Parse(data []byte, getenv func(string) (string, bool)) (*Config, error) {
	return ParseWith(data, getenv, Options{})
}

// ParseWith is [Parse] with options.
func ParseWith(data []byte, getenv func(string) (string, bool), o Options) (*Config, error) {
	if getenv == nil {
		getenv = func(string) (string, bool) { return "", false }
	}
	text, problems := expandJinja(string(data), getenv)
	d := &decoder{getenv: getenv, expanded: map[*yaml.Node]bool{}, problems: problems, lines: map[[2]string]int{}}

	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		d.problems = append(d.problems, syntaxProblem(err))
		return nil, &ValidationError{Problems: d.problems}
	}
	c := &Config{}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	empty := root.Kind == 0 || root.Kind == yaml.DocumentNode || isNull(root)
	if !empty {
		d.decodeValue(root, reflect.ValueOf(c).Elem(), "", "")
	}
	c.ApplyDefaults()
	problems, warnings := c.CheckWith(o)
	if empty {
		// One warning for the file as a whole says more than "no plugins".
		warnings = slices.DeleteFunc(warnings, func(p Problem) bool { return p.Field == "plugins" })
		d.warn("", "", 0, "the file is empty: no plugins, every message passes unchanged")
	}
	d.locate(problems)
	d.locate(warnings)
	c.Warnings = append(d.warnings, warnings...)
	// A field that did not decode is reported once, not again by Check.
	failed := map[[2]string]bool{}
	for _, p := range d.problems {
		failed[[2]string{p.Plugin, p.Field}] = true
	}
	problems = slices.DeleteFunc(problems, func(p Problem) bool { return failed[[2]string{p.Plugin, p.Field}] })
	problems = append(d.problems, problems...)
	sortByPlugin(c, problems)
	if len(problems) > 0 {
		return nil, &ValidationError{Problems: problems, Warnings: c.Warnings}
	}
	return c, nil
}

// syntaxProblem turns the error of parsing the YAML text into a Problem
// with the exact position of the fault. (yaml.v3 reported the start of the
// enclosing block, counted from 0, so its lines were early; v4 reports the
// fault's own mark, counted from 1.)
func syntaxProblem(err error) Problem {
	var le *yaml.LoadError
	if errors.As(err, &le) && le.Message != "" {
		return Problem{Message: le.Message, Line: le.Mark.Line, Column: le.Mark.Column}
	}
	return Problem{Message: strings.TrimPrefix(err.Error(), "yaml: ")}
}

// sortByPlugin orders problems by the position of their plugin in the file,
// settings outside plugins last, keeping the order within each.
func sortByPlugin(c *Config, problems []Problem) {
	pos := map[string]int{}
	for i, p := range c.Plugins {
		if _, dup := pos[p.Name]; !dup && p.Name != "" {
			pos[p.Name] = i
		}
	}
	rank := func(p Problem) int {
		if p.Plugin != "" {
			if i, ok := pos[p.Plugin]; ok {
				return i
			}
		}
		var i int
		if _, err := fmt.Sscanf(p.Field, "plugins[%d]", &i); err == nil {
			return i
		}
		if p.Field == "" {
			return -1 // the file as a whole comes first
		}
		return len(c.Plugins)
	}
	slices.SortStableFunc(problems, func(a, b Problem) int { return rank(a) - rank(b) })
}
