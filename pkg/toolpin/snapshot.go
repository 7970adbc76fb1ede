package toolpin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
)

// Snapshot is an approved set of definitions, as `extproc tools snapshot`
// writes it and extproc.tool_pinning.snapshot names it: for each kind,
// each definition's fingerprint. It applies to every MCP server the
// sidecar fronts (one, in the sidecar shape).
type Snapshot struct {
	Version           int                    `json:"version"`
	Server            string                 `json:"server,omitempty"` // where it was taken, for people
	Tools             map[string]Fingerprint `json:"tools,omitempty"`
	Prompts           map[string]Fingerprint `json:"prompts,omitempty"`
	ResourceTemplates map[string]Fingerprint `json:"resourceTemplates,omitempty"`
}

// SnapshotVersion is the format version this package writes and reads.
const SnapshotVersion = 1

// of returns the definitions of kind k.
func (s *Snapshot) of(k Kind) map[string]Fingerprint {
	switch k {
	case Tool:
		return s.Tools
	case Prompt:
		return s.Prompts
	case ResourceTemplate:
		return s.ResourceTemplates
	}
	return nil
}

// Add puts a definition of kind k in s.
func (s *Snapshot) Add(k Kind, name string, fp Fingerprint) {
	m := map[Kind]*map[string]Fingerprint{Tool: &s.Tools, Prompt: &s.Prompts, ResourceTemplate: &s.ResourceTemplates}[k]
	if m == nil {
		return
	}
	if *m == nil {
		*m = map[string]Fingerprint{}
	}
	(*m)[name] = fp
}

// Lookup returns the approved fingerprint of (k, name).
func (s *Snapshot) Lookup(k Kind, name string) (Fingerprint, bool) {
	fp, ok := s.of(k)[name]
	return fp, ok
}

// Encode writes s as indented JSON, keys sorted.
func (s *Snapshot) Encode() ([]byte, error) {
	s.Version = SnapshotVersion
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// ParseSnapshot reads a snapshot file's bytes, strictly: unknown keys, a
// version other than SnapshotVersion and a fingerprint member that is not
// a hex SHA-256 are errors.
func ParseSnapshot(b []byte) (*Snapshot, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var s Snapshot
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("tool pinning snapshot: %w", err)
	}
	if s.Version != SnapshotVersion {
		return nil, fmt.Errorf("tool pinning snapshot: version %d, want %d", s.Version, SnapshotVersion)
	}
	for _, k := range []Kind{Tool, Prompt, ResourceTemplate} {
		for name, fp := range s.of(k) {
			for member, sum := range fp {
				if !slices.Contains(kinds[k], member) {
					return nil, fmt.Errorf("tool pinning snapshot: %s %q: %q is not a member a %s fingerprint covers", k, name, member, k)
				}
				if len(sum) != 64 || !isHex(sum) {
					return nil, fmt.Errorf("tool pinning snapshot: %s %q: %s: not a hex SHA-256", k, name, member)
				}
			}
		}
	}
	return &s, nil
}

// LoadSnapshot reads and parses the snapshot file at path.
func LoadSnapshot(path string) (*Snapshot, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tool pinning snapshot: %w", err)
	}
	return ParseSnapshot(b)
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
