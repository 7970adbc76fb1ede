// Command chartcheck lints and renders a Helm chart with Helm's own
// library packages (chart loading, values, the template engine, the
// linter), as `helm lint --strict` and `helm template` do for a chart on
// disk, without the rest of the helm command: no cluster client, registry,
// repository or plugin code, about half of what building helm compiles.
// make test builds it once per machine for the deploy checks
// (internal/deploytest); `make chart-lint` still runs helm itself.
//
// Usage:
//
//	chartcheck lint CHART [--namespace NS] [--kube-version V] [--values FILE]... [--strict]
//	chartcheck template NAME CHART [--namespace NS] [--kube-version V] [--values FILE]...
//
// lint prints each message and fails on an error, or with --strict on a
// warning too. template prints the manifests, then the hooks, each as
// "---\n# Source: PATH\nCONTENT", in Helm's install order, as helm
// template does without a cluster.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/releaseutil"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "chartcheck:", err)
		os.Exit(1)
	}
}

// options are the command line after the verb.
type options struct {
	args        []string // positional: NAME CHART for template, CHART for lint
	namespace   string
	kubeVersion string
	values      []string
	strict      bool
}

func parse(args []string) (options, error) {
	o := options{namespace: "default"}
	for i := 0; i < len(args); i++ {
		a := args[i]
		flag, val, inline := strings.Cut(a, "=")
		takes := func() (string, error) {
			if inline {
				return val, nil
			}
			if i+1 >= len(args) {
				return "", fmt.Errorf("%s needs a value", flag)
			}
			i++
			return args[i], nil
		}
		var err error
		switch flag {
		case "--namespace", "-n":
			o.namespace, err = takes()
		case "--kube-version":
			o.kubeVersion, err = takes()
		case "--values", "-f":
			var v string
			v, err = takes()
			o.values = append(o.values, v)
		case "--strict":
			o.strict = true
		default:
			if strings.HasPrefix(a, "-") {
				return o, fmt.Errorf("unknown flag %s", a)
			}
			o.args = append(o.args, a)
		}
		if err != nil {
			return o, err
		}
	}
	return o, nil
}

func run(args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: chartcheck lint|template ...")
	}
	o, err := parse(args[1:])
	if err != nil {
		return err
	}
	vals, err := userValues(o.values)
	if err != nil {
		return err
	}
	kv := chartutil.DefaultCapabilities.KubeVersion
	if o.kubeVersion != "" {
		v, err := chartutil.ParseKubeVersion(o.kubeVersion)
		if err != nil {
			return fmt.Errorf("--kube-version: %w", err)
		}
		kv = *v
	}
	switch args[0] {
	case "lint":
		if len(o.args) != 1 {
			return errors.New("lint takes one chart directory")
		}
		return lintChart(out, o.args[0], vals, o.namespace, &kv, o.strict)
	case "template":
		if len(o.args) != 2 {
			return errors.New("template takes a release name and a chart directory")
		}
		return template(out, o.args[0], o.args[1], vals, o.namespace, kv)
	}
	return fmt.Errorf("unknown command %q (lint or template)", args[0])
}

// userValues merges the values files in order, later keys winning, as
// helm's --values does.
func userValues(files []string) (map[string]any, error) {
	base := map[string]any{}
	for _, f := range files {
		v, err := chartutil.ReadValuesFile(f)
		if err != nil {
			return nil, fmt.Errorf("values %s: %w", f, err)
		}
		base = mergeMaps(base, v.AsMap())
	}
	return base, nil
}

// mergeMaps merges b into a: maps key by key, anything else replaced,
// nulls kept (the chart's defaults are coalesced with them later, where a
// null removes a key), as helm's --values merges files. Helm's own merge
// is unexported in pkg/cli/values, whose package pulls in the getters
// (registries, plugins) this command leaves out; chartutil.CoalesceTables
// drops nulls at once, which would let a default through.
func mergeMaps(a, b map[string]any) map[string]any {
	out := make(map[string]any, len(a))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		if bm, ok := v.(map[string]any); ok {
			if am, ok := out[k].(map[string]any); ok {
				out[k] = mergeMaps(am, bm)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// lintChart is helm lint: every message printed, an error (a warning
// with strict) fails.
func lintChart(out io.Writer, dir string, vals map[string]any, namespace string, kv *chartutil.KubeVersion, strict bool) error {
	if _, err := os.Stat(path.Join(dir, chartutil.ChartfileName)); err != nil {
		return fmt.Errorf("unable to check Chart.yaml file in chart: %w", err)
	}
	linter := lint.AllWithKubeVersion(dir, vals, namespace, kv)
	worst := support.ErrorSev
	if strict {
		worst = support.WarningSev
	}
	failed := 0
	for _, m := range linter.Messages {
		fmt.Fprintln(out, m)
		if m.Severity >= worst {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%s: %d lint message(s) at or above %s", dir, failed, sevName(worst))
	}
	fmt.Fprintf(out, "==> Linted %s: no failures\n", dir)
	return nil
}

func sevName(s int) string {
	if s == support.WarningSev {
		return "WARNING"
	}
	return "ERROR"
}

// template is helm template without a cluster: the chart rendered for an
// install of release name in namespace, NOTES left out, manifests in
// install order, then the hooks.
func template(out io.Writer, name, dir string, vals map[string]any, namespace string, kv chartutil.KubeVersion) error {
	ch, err := loader.Load(dir)
	if err != nil {
		return fmt.Errorf("load %s: %w", dir, err)
	}
	if t := ch.Metadata.Type; t != "" && t != "application" {
		return fmt.Errorf("%s charts are not installable", t)
	}
	if err := chartutil.ProcessDependenciesWithMerge(ch, vals); err != nil {
		return err
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = kv
	if v := ch.Metadata.KubeVersion; v != "" && !chartutil.IsCompatibleRange(v, caps.KubeVersion.String()) {
		return fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s", v, caps.KubeVersion.String())
	}
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: name, Namespace: namespace, Revision: 1, IsInstall: true}, caps)
	if err != nil {
		return err
	}
	files, err := engine.Engine{}.Render(ch, rv)
	if err != nil {
		return err
	}
	for k := range files {
		if strings.HasSuffix(k, "NOTES.txt") {
			delete(files, k)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return fmt.Errorf("sort manifests: %w", err)
	}
	var b bytes.Buffer
	for _, m := range manifests {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.Name, m.Content)
	}
	var all bytes.Buffer
	fmt.Fprintln(&all, strings.TrimSpace(b.String()))
	for _, h := range hooks {
		fmt.Fprintf(&all, "---\n# Source: %s\n%s\n", h.Path, h.Manifest)
	}
	_, err = out.Write(all.Bytes())
	return err
}
