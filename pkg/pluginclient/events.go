package pluginclient

import "sync/atomic"

// counters are a client's Stats, kept as an Observer: every event is
// reported once, through events, and counted here.
type counters struct {
	connects, rebuilds, retries, retryFailures, circuitOpens atomic.Uint64
	healthOK, healthFailed                                   atomic.Uint64
}

func (c *counters) OnRebuild(string) { c.rebuilds.Add(1) }

func (c *counters) OnRetry(_ string, ok bool) {
	c.retries.Add(1)
	if !ok {
		c.retryFailures.Add(1)
	}
}

func (c *counters) OnStateChange(_ string, _, to State) {
	if to == Down {
		c.circuitOpens.Add(1)
	}
}

func (c *counters) OnHealthCheck(_ string, ok bool) {
	if ok {
		c.healthOK.Add(1)
	} else {
		c.healthFailed.Add(1)
	}
}

// stats returns the counters with state st.
func (c *counters) stats(st State) Stats {
	return Stats{
		State:              st,
		Connects:           c.connects.Load(),
		Rebuilds:           c.rebuilds.Load(),
		Retries:            c.retries.Load(),
		RetryFailures:      c.retryFailures.Load(),
		CircuitOpens:       c.circuitOpens.Load(),
		HealthChecksOK:     c.healthOK.Load(),
		HealthChecksFailed: c.healthFailed.Load(),
	}
}

// events reports one plugin's events to its counters and to the optional
// Observer of Options.
type events struct {
	name  string
	count *counters
	obs   Observer // nil: none
}

func (e events) rebuild(cause string) {
	e.count.OnRebuild(e.name)
	if e.obs != nil {
		e.obs.OnRebuild(e.name)
	}
	if so, ok := e.obs.(SessionObserver); ok {
		so.OnRebuildCause(e.name, cause)
	}
}

// sessions reports the sessions by state (nil: the client is closed).
func (e events) sessions(s *Sessions) {
	so, ok := e.obs.(SessionObserver)
	if !ok {
		return
	}
	if s == nil {
		s = &Sessions{}
	}
	so.OnSessions(e.name, *s)
}

func (e events) retry(ok bool) {
	e.count.OnRetry(e.name, ok)
	if e.obs != nil {
		e.obs.OnRetry(e.name, ok)
	}
}

func (e events) stateChange(from, to State) {
	e.count.OnStateChange(e.name, from, to)
	if e.obs != nil {
		e.obs.OnStateChange(e.name, from, to)
	}
}

func (e events) health(ok bool) {
	e.count.OnHealthCheck(e.name, ok)
	if e.obs != nil {
		e.obs.OnHealthCheck(e.name, ok)
	}
}
