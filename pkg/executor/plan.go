package executor

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/hookfamily"
)

// The phases, in execution order (docs/plugin-protocol.md §4.1).
const (
	phaseSequential = iota
	phaseTransform
	phaseAudit
	phaseConcurrent
	phaseFireAndForget
	numPhases
)

var phaseModes = [numPhases]config.Mode{
	config.ModeSequential, config.ModeTransform, config.ModeAudit, config.ModeConcurrent, config.ModeFireAndForget,
}

// entry is one plugin scheduled on one hook.
type entry struct {
	name       string
	key        string // lower-case name
	mode       config.Mode
	onError    config.OnError
	priority   int
	conditions []config.Condition
	// local, when set, is the plugin itself: it runs in this process and
	// cannot block ([NonBlocking]). It is called directly, gets no timer
	// of its own and a view of the request context instead of a copy.
	local LocalPlugin
	// series, when set, is where the Observer counts this plugin's
	// invocations of this hook ([SeriesObserver]).
	series HookObserver
}

// hookPlan is the plugins of one hook, by phase, each phase in ascending
// priority (config order among equals).
type hookPlan struct {
	phases [numPhases][]*entry
	// nonBlocking: no plugin the hook waits for can block; its deadline
	// needs no timer (clockDeadline).
	nonBlocking bool
}

// snapshot is the plan of every hook for one generation of the plugin set.
type snapshot struct {
	gen   uint64
	hooks map[cpex.HookType]*hookPlan
}

// buildSnapshot plans every hook for a generation of the merged configs.
// nonBlocking, if not nil, hands over the plugins that cannot block;
// series, if not nil, where each plugin's invocations of a hook go.
func buildSnapshot(gen uint64, plugins []config.Plugin, settings config.PluginSettings, nonBlocking func(string) LocalPlugin,
	series func(string, cpex.HookType) HookObserver) *snapshot {
	s := &snapshot{gen: gen, hooks: map[cpex.HookType]*hookPlan{}}
	for i := range plugins {
		p := &plugins[i]
		mode := p.EffectiveMode()
		phase := slices.Index(phaseModes[:], mode)
		if phase < 0 { // disabled
			continue
		}
		e := &entry{
			name:       p.Name,
			key:        strings.ToLower(p.Name),
			mode:       mode,
			onError:    p.EffectiveOnError(settings),
			priority:   p.EffectivePriority(),
			conditions: slices.Clone(p.Conditions),
		}
		if nonBlocking != nil {
			e.local = nonBlocking(p.Name)
		}
		for j, h := range p.Hooks {
			if slices.Contains(p.Hooks[:j], h) {
				continue // listed twice: run once
			}
			hp := s.hooks[h]
			if hp == nil {
				hp = &hookPlan{}
				s.hooks[h] = hp
			}
			he := e
			if series != nil {
				he = new(*e)
				he.series = series(p.Name, h)
			}
			hp.phases[phase] = append(hp.phases[phase], he)
		}
	}
	for _, hp := range s.hooks {
		hp.nonBlocking = true
		for i, ph := range hp.phases {
			slices.SortStableFunc(ph, func(a, b *entry) int { return a.priority - b.priority })
			if i != phaseFireAndForget { // they run after the hook, on their own context
				hp.nonBlocking = hp.nonBlocking && !slices.ContainsFunc(ph, func(e *entry) bool { return e.local == nil })
			}
		}
	}
	return s
}

// Target names what a message is about, for conditions: the family and
// the name of the tool, prompt or resource URI. Server, tenant and user come
// from RequestContext.Global.
type Target = hookfamily.Target

// matches reports whether a plugin with these conditions runs for hook, as
// cpex decides (cpex/framework/utils.py payload_matches):
//   - no conditions: it runs;
//   - it runs when ANY condition matches; inside one, every set field must
//     match (an empty list is unset);
//   - server_ids / tenant_ids: Global.ServerID / TenantID must be listed;
//   - user_patterns: a pattern is a substring of the user (a JSON string, or
//     the "email" or "id" of a JSON object); a request without a user
//     matches, as in cpex;
//   - tools / prompts / resources: only the list of the Target's family
//     applies (hookfamily.Family.ConditionField), matched exactly against
//     the Target's name; the lists of other families are ignored, and an
//     empty name matches, as in cpex;
//   - agents and content_types are ignored: agent hooks never fire here and
//     the plugin context carries no content type.
func matches(conds []config.Condition, g *cpex.GlobalContext, t Target, users func() []string) bool {
	if len(conds) == 0 {
		return true
	}
	for i := range conds {
		if matchOne(&conds[i], g, t, users) {
			return true
		}
	}
	return false
}

func matchOne(c *config.Condition, g *cpex.GlobalContext, t Target, users func() []string) bool {
	if len(c.ServerIDs) > 0 && !slices.Contains(c.ServerIDs, g.ServerID) {
		return false
	}
	if len(c.TenantIDs) > 0 && !slices.Contains(c.TenantIDs, g.TenantID) {
		return false
	}
	if len(c.UserPatterns) > 0 {
		if u := users(); len(u) > 0 && !anySubstring(u, c.UserPatterns) {
			return false
		}
	}
	if list := t.Family.Conditions(c); len(list) > 0 && t.Name != "" && !slices.Contains(list, t.Name) {
		return false
	}
	return true
}

func anySubstring(users, patterns []string) bool {
	for _, u := range users {
		for _, p := range patterns {
			if strings.Contains(u, p) {
				return true
			}
		}
	}
	return false
}

// userStrings returns what user_patterns are matched against: the user when
// it is a JSON string, its "email" and "id" when it is an object.
func userStrings(raw json.RawMessage) []string {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return nil
		}
		return []string{s}
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return nil
	}
	var out []string
	for _, k := range []string{"email", "id"} {
		v, ok := obj[k]
		if !ok || string(v) == "null" {
			continue
		}
		if json.Unmarshal(v, &s) == nil {
			if s != "" {
				out = append(out, s)
			}
			continue
		}
		out = append(out, string(v)) // a numeric id
	}
	return out
}
