package processor

import "time"

// Observer is told what each stream did; the metrics package implements it.
// Labels passed are from small fixed sets.
type Observer interface {
	StreamOpened()
	StreamClosed()
	// Message counts a message received from Envoy, by oneof name.
	Message(kind string)
	// ModeOverride counts the body mode chosen ("skip", "request_buffered",
	// "response_headers" (a GET stream whose response headers decide),
	// "response_none", "response_buffered", "response_streamed").
	ModeOverride(mode string)
	// Immediate counts an immediate response by reason ("blocked",
	// "plugin_error", "invalid_request", "too_large", "unsupported_encoding",
	// "internal", "header_mismatch", "header_mirror", "mcp_filter_mismatch", "repeated_header",
	// "pinned")
	// or a result refused in a stream ("unattributed", "invalid_response").
	Immediate(reason string)
	// BodyInspected counts a body (or SSE event) parsed, by direction
	// ("request", "response"), with its size.
	BodyInspected(direction string, bytes int)
	// RuleDecision counts what a rule did: "deny" (a message refused),
	// "hide" (n list items dropped), or under shadow "would_deny" and
	// "would_hide".
	RuleDecision(rule, decision string, n int)
	// RuleEvaluation observes the time the rules took, by phase
	// ("request": one message checked; "list": one list result filtered).
	RuleEvaluation(phase string, d time.Duration)
	// PinChange counts a definition a list showed changed since it was
	// pinned, by kind ("tool", "prompt", "resourceTemplate") and what it
	// cost ("alert", "hide", "block").
	PinChange(kind, action string)
	// Shadowed counts what a plugin, rule or check would have done and
	// was not let to (extproc.shadow, or a rule's mode shadow): by whom
	// ("plugin", "rule", "pin"), its name, and the decision
	// ("would_deny", "would_modify").
	Shadowed(by, name, decision string)
	// ListRead counts a list answer read for the rules, pinning or a list
	// hook that is large enough to be remembered (listmemo.go), by where
	// its parse came from: "memo" (the same bytes were read before) or
	// "scan" (read now).
	ListRead(from string)
}

type nopObserver struct{}

func (nopObserver) StreamOpened()                        {}
func (nopObserver) StreamClosed()                        {}
func (nopObserver) Message(string)                       {}
func (nopObserver) ModeOverride(string)                  {}
func (nopObserver) Immediate(string)                     {}
func (nopObserver) BodyInspected(string, int)            {}
func (nopObserver) RuleDecision(string, string, int)     {}
func (nopObserver) RuleEvaluation(string, time.Duration) {}
func (nopObserver) PinChange(string, string)             {}
func (nopObserver) Shadowed(string, string, string)      {}
func (nopObserver) ListRead(string)                      {}
