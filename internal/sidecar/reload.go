package sidecar

import (
	"bytes"
	"context"
	"errors"
	"os"
	"time"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
)

// watcher notices changes of the config file by content. Polling the
// content (rather than watching inotify events) sees every way Kubernetes
// updates a mounted ConfigMap — an atomic swap of the ..data symlink — as
// well as editors that replace or rewrite the file, with no special cases.
type watcher struct {
	path string
	last []byte
}

func newWatcher(path string) *watcher {
	w := &watcher{path: path}
	if path != "" {
		w.last, _ = os.ReadFile(path)
	}
	return w
}

// changed reports whether the file content differs from the last seen, and
// remembers the new content. An unreadable file is not a change: the next
// successful read is compared.
func (w *watcher) changed() bool {
	if w.path == "" {
		return false
	}
	data, err := os.ReadFile(w.path)
	if err != nil || bytes.Equal(data, w.last) {
		return false
	}
	w.last = data
	return true
}

// reload validates the config file and, if valid, swaps it in atomically:
// new streams get the new generation, open streams keep theirs; unchanged
// plugins keep their sessions, new ones are connected, removed ones closed
// once the streams that may use them are done. An invalid file is rejected
// with the same messages as --check-config and the old config stays.
func (s *sidecar) reload(w *watcher) {
	cfg, err := config.Load(w.path)
	if err != nil {
		s.metrics.Reload(false)
		var verr *config.ValidationError
		if errors.As(err, &verr) {
			for _, p := range verr.Problems {
				s.log.Error().Str("config", w.path).Str("plugin", p.Plugin).Str("field", p.Field).Msg("config reload rejected: " + p.String())
			}
		} else {
			s.log.Error().Err(err).Str("config", w.path).Msg("config reload rejected")
		}
		return
	}
	prev := s.current.Load()
	if attributionChanged(prev.cfg, cfg) {
		s.log.Warn().Str("config", w.path).Msg("extproc.attribution changed: it applies at the next start, the store in use is kept")
	}
	if auditChanged(prev.cfg, cfg) {
		s.log.Warn().Str("config", w.path).Bool("audit_on", s.audit != nil).
			Msg("extproc.audit changed: restart the sidecar to apply it; until then the audit sink opened at start stays as it was (on or off); extproc.audit.include applies now")
	}
	gen, created, removed, err := s.build(cfg, prev)
	if err != nil {
		s.metrics.Reload(false)
		s.log.Error().Err(err).Str("config", w.path).Msg("config reload rejected")
		return
	}
	startClients(s.clientCtx, created)
	s.current.Store(gen)
	s.metrics.Reload(true)
	for _, wn := range cfg.Warnings {
		s.log.Warn().Str("plugin", wn.Plugin).Str("field", wn.Field).Msg(wn.Message)
	}
	var gone []string
	for _, p := range prev.cfg.Plugins {
		if !gen.set.has(p.Name) {
			gone = append(gone, p.Name)
		}
	}
	s.log.Info().Str("config", w.path).Int("plugins", len(cfg.Plugins)).Int("connected", len(created)).
		Int("closed", len(removed)).Msg("config reloaded")

	// Retire the old generation once its streams are done: they may still
	// call its executor and clients until then.
	delay := s.opts.GracePeriod + prev.cfg.HookTimeout()
	s.retired.Add(1)
	go func() {
		defer s.retired.Done()
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-s.drained.Done():
		}
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		if err := prev.exec.Close(ctx); err != nil {
			s.log.Warn().Err(err).Msg("close retired executor")
		}
		if err := closeClients(ctx, removed); err != nil {
			s.log.Warn().Err(err).Msg("close removed plugins")
		}
		// A later reload may have brought a plugin back under the same
		// name: its series are live again.
		cur := s.current.Load()
		for _, name := range gone {
			if !cur.set.has(name) {
				s.metrics.ForgetPlugin(name)
			}
		}
	}()
}
