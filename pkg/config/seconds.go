package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v4"
)

// Seconds is a duration written in seconds (int or float) as cpex does.
type Seconds struct{ time.Duration }

// ErrBadSeconds is wrapped by every error about a value that is not a
// non-negative number of seconds.
var ErrBadSeconds = errors.New("want a non-negative number of seconds")

// NewSeconds returns d as a *Seconds, for building configs in code.
func NewSeconds(d time.Duration) *Seconds { return &Seconds{d} }

// parseSeconds turns "30", "0.1" or "1e-3" into a duration. Negative values,
// NaN, infinities and values beyond time.Duration are refused.
func parseSeconds(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("%w, got %q", ErrBadSeconds, s)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return 0, fmt.Errorf("%w, got %s", ErrBadSeconds, s)
	}
	ns := math.Round(f * float64(time.Second))
	if ns >= math.MaxInt64 {
		return 0, fmt.Errorf("%w: %s is too large", ErrBadSeconds, s)
	}
	return time.Duration(ns), nil
}

// UnmarshalYAML implements [yaml.Unmarshaler]: an int or float number of
// seconds (a quoted number is accepted too, as pydantic does). Negative
// values are refused.
func (s *Seconds) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("%w, got a %s", ErrBadSeconds, kindName(n))
	}
	switch n.ShortTag() {
	case "!!int", "!!float", "!!str":
	default:
		return fmt.Errorf("%w, got %q", ErrBadSeconds, n.Value)
	}
	d, err := parseSeconds(n.Value)
	if err != nil {
		return err
	}
	s.Duration = d
	return nil
}

// MarshalYAML implements [yaml.Marshaler]: the duration as seconds.
func (s Seconds) MarshalYAML() (any, error) { return s.Duration.Seconds(), nil }

// UnmarshalJSON implements [json.Unmarshaler] with the rules of
// [Seconds.UnmarshalYAML]; JSON null leaves s unchanged.
func (s *Seconds) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if string(data) == "null" {
		return nil
	}
	text := string(data)
	if len(data) > 0 && data[0] == '"' {
		if err := json.Unmarshal(data, &text); err != nil {
			return fmt.Errorf("%w: %v", ErrBadSeconds, err)
		}
	}
	d, err := parseSeconds(text)
	if err != nil {
		return err
	}
	s.Duration = d
	return nil
}

// MarshalJSON implements [json.Marshaler]: the duration as seconds.
func (s Seconds) MarshalJSON() ([]byte, error) {
	return strconv.AppendFloat(nil, s.Duration.Seconds(), 'g', -1, 64), nil
}

// kindName names a node kind for messages.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.AliasNode:
		return "alias"
	case yaml.DocumentNode:
		return "document"
	}
	return "scalar"
}
