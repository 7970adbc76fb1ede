package identity

import (
	"strings"
)

// peerSource reads the mTLS peer's id from a request attribute.
type peerSource struct {
	attr    string
	domains []string // SPIFFE trust domains; nil: any id
}

func (s *peerSource) resolve(r *Request) (Identity, bool) {
	v, ok := bounded(r.Attributes.GetFields()[s.attr].GetStringValue())
	if !ok || !s.trusted(v) {
		return Identity{}, false
	}
	return Identity{Source: SourcePeer, User: v}, true
}

// trusted reports whether id is a SPIFFE id of a configured trust domain
// (any id when none is configured).
func (s *peerSource) trusted(id string) bool {
	if len(s.domains) == 0 {
		return true
	}
	rest, ok := strings.CutPrefix(id, "spiffe://")
	if !ok {
		return false
	}
	td, path, _ := strings.Cut(rest, "/")
	if path == "" {
		return false // a trust domain alone names no workload
	}
	for _, d := range s.domains {
		if td == d {
			return true
		}
	}
	return false
}
