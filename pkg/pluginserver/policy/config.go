package policy

import (
	"errors"
	"fmt"
	"os"

	"sigs.k8s.io/yaml"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// ErrInvalidConfig is wrapped by every configuration error.
var ErrInvalidConfig = errors.New("invalid policy configuration")

// Redaction rewrites every match of Pattern with Replacement.
type Redaction struct {
	Pattern     string `json:"pattern"`
	Replacement string `json:"replacement"`
}

// Config is one policy plugin.
type Config struct {
	// Name is the plugin name (default DefaultName).
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	// Deny lists the patterns that block a request.
	Deny []string `json:"deny,omitempty"`
	// Redact lists the rewrites applied to requests and results.
	Redact []Redaction `json:"redact,omitempty"`
	// ViolationCode is the code of a deny violation (default ViolationCode).
	ViolationCode string `json:"violation_code,omitempty"`
	// Hooks, Mode and Priority are what get_plugin_config reports. Default
	// hooks: those the rules can act on; mode sequential; priority 50.
	Hooks    []cpex.HookType `json:"hooks,omitempty"`
	Mode     string          `json:"mode,omitempty"`
	Priority *int            `json:"priority,omitempty"`
}

// File is a policy file: YAML or JSON with a list of plugins, e.g.
//
//	plugins:
//	  - name: DenyList
//	    deny: ["(?i)rm -rf", "^drop_"]
//	  - name: Redactor
//	    mode: transform
//	    redact:
//	      - {pattern: '\d{3}-\d{2}-\d{4}', replacement: "[SSN]"}
type File struct {
	Plugins []Config `json:"plugins"`
}

// ParseFile parses a policy file (YAML or JSON; unknown fields are errors).
func ParseFile(data []byte) ([]Config, error) {
	var f File
	if err := yaml.UnmarshalStrict(data, &f, yaml.DisallowUnknownFields); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if len(f.Plugins) == 0 {
		return nil, fmt.Errorf("%w: no plugins", ErrInvalidConfig)
	}
	return f.Plugins, nil
}

// LoadFile reads and parses the policy file at path.
func LoadFile(path string) ([]Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read policy file: %w", err)
	}
	cfgs, err := ParseFile(data)
	if err != nil {
		return nil, fmt.Errorf("policy file %s: %w", path, err)
	}
	return cfgs, nil
}

// ParseRedaction parses a PATTERN=REPLACEMENT flag value. It splits at the
// first "=" not preceded by a backslash; write "\=" for a literal "=" in the
// pattern (RE2 reads "\=" as "="). The replacement may be empty.
func ParseRedaction(s string) (Redaction, error) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++ // skip the escaped character
		case '=':
			if i == 0 {
				return Redaction{}, fmt.Errorf("%w: redaction %q has an empty pattern", ErrInvalidConfig, s)
			}
			return Redaction{Pattern: s[:i], Replacement: s[i+1:]}, nil
		}
	}
	return Redaction{}, fmt.Errorf("%w: redaction %q is not PATTERN=REPLACEMENT", ErrInvalidConfig, s)
}
