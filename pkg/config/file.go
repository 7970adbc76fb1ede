package config

import "time"

// Config is a whole configuration file.
type Config struct {
	Plugins        []Plugin       `yaml:"plugins" json:"plugins" default:"none: every message passes unchanged (with a warning)"`
	PluginDirs     []string       `yaml:"plugin_dirs,omitempty" json:"plugin_dirs,omitempty" default:"none; accepted and ignored"`
	PluginSettings PluginSettings `yaml:"plugin_settings" json:"plugin_settings" default:"each key's default"`
	Extproc        Extproc        `yaml:"extproc" json:"extproc" default:"each key's default"`

	// Warnings lists what loaded but deserves attention: unknown keys,
	// settings the sidecar ignores, hooks that never fire here. Filled by
	// [Parse] and [Load]; never part of the file.
	Warnings []Problem `yaml:"-" json:"-"`
}

// cpexOnlyKeys: the top-level server_settings of a plugin server's own
// file (docs/plugin-protocol.md §4).
func (c *Config) cpexOnlyKeys() []string { return []string{"server_settings"} }

// setDefaults: the file as a whole has none; its sections do.
func (c *Config) setDefaults(*Config) {}

// check warns about a file without plugins; the plugins and the other
// sections check themselves.
func (c *Config) check(v *validator, _ *Config, _ string) {
	if len(c.Plugins) == 0 {
		v.warn("", "plugins", "no plugins configured: every message passes unchanged")
	}
}

// Defaults of plugin_settings, as cpex defines them.
const (
	DefaultPluginTimeout       = 30 * time.Second
	DefaultHealthCheckInterval = 60 * time.Second
)

// PluginSettings is "plugin_settings".
type PluginSettings struct {
	PluginTimeout               *Seconds `yaml:"plugin_timeout,omitempty" json:"plugin_timeout,omitempty" default:"30"` // default 30 s
	FailOnPluginError           bool     `yaml:"fail_on_plugin_error,omitempty" json:"fail_on_plugin_error,omitempty" default:"false: each plugin's on_error applies"`
	ParallelExecutionWithinBand bool     `yaml:"parallel_execution_within_band,omitempty" json:"parallel_execution_within_band,omitempty" default:"false; ignored (mode concurrent runs plugins in parallel)"`
	PluginHealthCheckInterval   *Seconds `yaml:"plugin_health_check_interval,omitempty" json:"plugin_health_check_interval,omitempty" default:"60"` // default 60 s
}

// cpexOnlyKeys: enable_plugin_api (the gateway's plugin admin API).
func (s *PluginSettings) cpexOnlyKeys() []string { return []string{"enable_plugin_api"} }

func (s *PluginSettings) setDefaults(*Config) {
	if s.PluginTimeout == nil {
		s.PluginTimeout = NewSeconds(DefaultPluginTimeout)
	}
	if s.PluginHealthCheckInterval == nil {
		s.PluginHealthCheckInterval = NewSeconds(DefaultHealthCheckInterval)
	}
}

func (s *PluginSettings) check(v *validator, _ *Config, at string) {
	if s.PluginTimeout != nil && s.PluginTimeout.Duration <= 0 {
		v.problem("", joinPath(at, "plugin_timeout"), "must be positive")
	}
	if s.PluginHealthCheckInterval != nil && s.PluginHealthCheckInterval.Duration <= 0 {
		v.problem("", joinPath(at, "plugin_health_check_interval"), "must be positive")
	}
	if s.ParallelExecutionWithinBand {
		v.warn("", joinPath(at, "parallel_execution_within_band"), "ignored: use mode concurrent to run plugins in parallel")
	}
}

// Timeout is plugin_timeout with its default (30 s): the bound of one
// plugin invocation.
func (s *PluginSettings) Timeout() time.Duration {
	if s == nil || s.PluginTimeout == nil {
		return DefaultPluginTimeout
	}
	return s.PluginTimeout.Duration
}

// HealthCheckInterval is plugin_health_check_interval with its default (60 s).
func (s *PluginSettings) HealthCheckInterval() time.Duration {
	if s == nil || s.PluginHealthCheckInterval == nil {
		return DefaultHealthCheckInterval
	}
	return s.PluginHealthCheckInterval.Duration
}
