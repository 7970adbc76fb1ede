package deploytest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Where the chart lives, and how it is rendered.
const (
	chartDir      = "charts/mcp-extproc"
	helmRelease   = "mcp-extproc"
	helmNamespace = "mcp-extproc"
	helmKubeVer   = "1.33.0" // helm built from source assumes 1.20; the chart needs >= 1.29
	// helmBinaryPath is helm's lint and template (hack/tools/chartcheck:
	// helm's library behind the same command lines), built by make test.
	helmBinaryPath = "bin/chartcheck"
)

// helmShape is one way of installing the chart the tests render.
type helmShape struct {
	name   string
	values string // a values file under testdata/helm, or "" for the defaults
	// productOnly: the render must hold the product of manifests/base alone.
	productOnly bool
	// sidecars and envoyFilters: how many Pods with Envoy, EnvoyFilters.
	sidecars, envoyFilters int
	// sharedStore: the replicas share the attribution store through a
	// Redis Service of the render (checkGatewayRedis).
	sharedStore bool
}

var helmShapes = []helmShape{
	{name: "sidecar-defaults", productOnly: true, sidecars: 1},
	{name: "sidecar-full", values: "testdata/helm/sidecar-full.yaml", sidecars: 1},
	{name: "gateway-full", values: "testdata/helm/gateway-full.yaml", envoyFilters: 1},
	{name: "gateway-plain", values: "testdata/helm/gateway-plain.yaml"},
	{name: "gateway-redis", values: "testdata/helm/gateway-redis.yaml", sharedStore: true},
}

// helmBinary returns bin/chartcheck, or skips the test when it is not built.
func helmBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(repoRoot(t), helmBinaryPath)
	if _, err := os.Stat(bin); errors.Is(err, fs.ErrNotExist) {
		t.Skipf("%s not built: the chart is not checked (`make bin/chartcheck` builds it; `make test` does)", helmBinaryPath)
	}
	return bin
}

// runHelm runs helm in the repository root with a deadline.
func runHelm(t *testing.T, bin string, args ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("helm %v: %w\n%s%s", args, err, out, stderr.Bytes())
	}
	return out, nil
}

// helmArgs is the values part of a helm command line for a shape.
func (sh helmShape) helmArgs(verb string) []string {
	args := []string{verb}
	if verb == "template" {
		args = append(args, helmRelease)
	}
	args = append(args, chartDir, "--namespace", helmNamespace, "--kube-version", helmKubeVer)
	if sh.values != "" {
		args = append(args, "--values", filepath.Join("internal/deploytest", sh.values))
	}
	return args
}

// decodeHelm splits helm template's output into documents and files each
// one, strictly decoded, into a rendered.
func decodeHelm(dir string, out []byte) (*rendered, []error) {
	r := &rendered{dir: dir, strictRollout: true}
	var errs []error
	rd := k8syaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(out)))
	for i := 0; ; i++ {
		doc, err := rd.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return r, append(errs, fmt.Errorf("%s: document %d: %w", dir, i, err))
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: document %d: %w", dir, i, err))
			continue
		}
		if string(js) == "null" {
			continue // only comments
		}
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(js, &meta); err != nil {
			errs = append(errs, fmt.Errorf("%s: document %d: %w", dir, i, err))
			continue
		}
		where := fmt.Sprintf("%s: %s %s", dir, meta.Kind, meta.Metadata.Name)
		errs = append(errs, r.add(where, meta.APIVersion+" "+meta.Kind, js)...)
	}
	return r, errs
}

// renderChart lints and renders one shape with bin/chartcheck.
func renderChart(t *testing.T, bin string, sh helmShape) *rendered {
	t.Helper()
	if _, err := runHelm(t, bin, append(sh.helmArgs("lint"), "--strict")...); err != nil {
		t.Fatal(err)
	}
	out, err := runHelm(t, bin, sh.helmArgs("template")...)
	if err != nil {
		t.Fatal(err)
	}
	r, errs := decodeHelm(chartDir+" ("+sh.name+")", out)
	for _, err := range errs {
		t.Error(err)
	}
	r.productOnly = sh.productOnly
	return r
}

// TestHelmChart lints and renders both shapes of the chart and runs on the
// objects the same checks as on the kustomize output (security context,
// probes, ports, Services, plugin URLs and affinity, the Envoy bootstrap,
// the EnvoyFilter, PDBs, monitors, NetworkPolicies), plus: every mounted
// ConfigMap rolls the Pods through a matching checksum annotation, and the
// alerts' metrics exist.
//
// It needs bin/chartcheck (`make bin/chartcheck`; `make test` builds it) and skips,
// in one line, without it.
func TestHelmChart(t *testing.T) {
	bin := helmBinary(t)
	s := loadSnapshot(t)
	sidecar, envoy := sidecarMetrics(t), envoyMetrics()
	for _, sh := range helmShapes {
		t.Run(sh.name, func(t *testing.T) {
			r := renderChart(t, bin, sh)
			for _, err := range checkChartRender(s, r, sh, sidecar, envoy) {
				t.Error(err)
			}
		})
	}
	t.Run("defaults match base", func(t *testing.T) { testChartDefaultsMatchBase(t, bin, s) })
	t.Run("broken", func(t *testing.T) { testHelmChartBroken(t, bin, s, sidecar, envoy) })
}

// checkChartRender runs the deploy checks on one render of the chart.
func checkChartRender(s snapshot, r *rendered, sh helmShape, sidecar, envoy map[string]bool) []error {
	var p problems
	pods, errs := checkRendered(s, r)
	p.errs = append(p.errs, errs...)
	if r.productOnly {
		p.errs = append(p.errs, checkProductOnly(r, pods)...)
	}
	n := 0
	for _, pd := range pods {
		if pd.envoy != nil {
			n++
		}
	}
	if n != sh.sidecars {
		p.addf("%s: %d Deployments with the Envoy sidecar, want %d", r.dir, n, sh.sidecars)
	}
	if len(r.envoyFilters) != sh.envoyFilters {
		p.addf("%s: %d EnvoyFilters, want %d", r.dir, len(r.envoyFilters), sh.envoyFilters)
	}
	if len(r.rules) > 0 {
		p.errs = append(p.errs, checkAlertRules(r.rules, sidecar, envoy)...)
	}
	if sh.sharedStore {
		p.errs = append(p.errs, checkGatewayRedis(r, pods)...)
	}
	return p.errs
}

// brokenChart breaks one file of a copy of the chart; rendering a shape of
// it must report a problem mentioning want.
type brokenChart struct {
	name, file, old, new, want string
	shape                      int // index in helmShapes
}

var brokenCharts = []brokenChart{
	{name: "checksum of the wrong thing", file: "templates/_helpers.tpl",
		old: "checksum/extproc-config: {{ .Values.config | sha256sum }}", new: "checksum/extproc-config: {{ .Values.image | toString | sha256sum }}",
		want: "annotation checksum/extproc-config is", shape: 1},
	{name: "no checksum", file: "templates/_helpers.tpl",
		old: "checksum/envoy-config: {{", new: "x-envoy-config: {{",
		want: "no checksum/envoy-config annotation", shape: 0},
	{name: "root filesystem writable", file: "values.yaml",
		old: "  readOnlyRootFilesystem: true", new: "  readOnlyRootFilesystem: false",
		want: "readOnlyRootFilesystem must be true", shape: 2},
	{name: "probe on a missing port", file: "templates/_helpers.tpl",
		old: "      path: /readyz\n      port: admin", new: "      path: /readyz\n      port: metrics",
		want: "readinessProbe port metrics is not a port", shape: 0},
	{name: "NetworkPolicy opens ext_proc in the sidecar", file: "templates/networkpolicy.yaml",
		old: "    - port: envoy-http\n", new: "    - port: envoy-http\n    - port: grpc\n",
		want: "opens extproc's gRPC port 50052", shape: 1},
	{name: "PodMonitor scrapes Envoy admin", file: "templates/monitoring.yaml",
		old: "path: /stats/prometheus", new: "path: /stats",
		want: `path "/stats", Envoy's stats listener serves /stats/prometheus`, shape: 1},
	{name: "EnvoyFilter to another namespace", file: "templates/envoyfilter.yaml",
		old: "{{ .Release.Namespace }}.svc.cluster.local", new: "default.svc.cluster.local",
		want: "no Service mcp-extproc in namespace default", shape: 2},
	{name: "gateway Service not headless", file: "templates/gateway.yaml",
		old: "  clusterIP: None\n", new: "", want: "must be headless", shape: 2},
	{name: "Envoy bootstrap drifts", file: "files/envoy.yaml",
		old: "message_timeout: 7s", new: "message_timeout: 3s", want: "message_timeout 3s must exceed", shape: 0},
	{name: "alert on a made-up metric", file: "files/prometheusrule.yaml",
		old: "mcp_extproc_plugin_circuit_open", new: "mcp_extproc_plugin_circuit_opened",
		want: "metric mcp_extproc_plugin_circuit_opened is exported neither", shape: 1},
	{name: "Redis password not mounted", file: "templates/_helpers.tpl",
		old: "    mountPath: /etc/mcp-extproc-redis\n", new: "    mountPath: /etc/redis\n",
		want: "password_file /etc/mcp-extproc-redis/password is in no volume mounted", shape: 4},
	{name: "Valkey Service renamed", file: "templates/valkey.yaml",
		old:  "  name: {{ include \"mcp-extproc.fullname\" . }}-valkey\n  namespace: {{ .Release.Namespace }}\n  labels:\n    app.kubernetes.io/name: valkey\n    app.kubernetes.io/instance: {{ .Release.Name }}\nspec:\n  selector:",
		new:  "  name: {{ include \"mcp-extproc.fullname\" . }}-redis\n  namespace: {{ .Release.Namespace }}\n  labels:\n    app.kubernetes.io/name: valkey\n    app.kubernetes.io/instance: {{ .Release.Name }}\nspec:\n  selector:",
		want: "redis address mcp-extproc-valkey:6379 is no Service port", shape: 4},
}

// testHelmChartBroken proves the checks bite on the chart: each case breaks
// a copy of it, and its render must report the problem.
func testHelmChartBroken(t *testing.T, bin string, s snapshot, sidecar, envoy map[string]bool) {
	src := filepath.Join(repoRoot(t), chartDir)
	for _, tc := range brokenCharts {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "mcp-extproc")
			if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, tc.file)
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(data, []byte(tc.old)) {
				t.Fatalf("%q does not occur in %s", tc.old, tc.file)
			}
			if err := os.WriteFile(p, bytes.Replace(data, []byte(tc.old), []byte(tc.new), 1), 0o644); err != nil {
				t.Fatal(err)
			}
			sh := helmShapes[tc.shape]
			args := sh.helmArgs("template")
			args[2] = dir // the chart argument
			out, err := runHelm(t, bin, args...)
			if err != nil {
				t.Fatal(err)
			}
			r, errs := decodeHelm(sh.name, out)
			r.productOnly = sh.productOnly
			errs = append(errs, checkChartRender(s, r, sh, sidecar, envoy)...)
			for _, err := range errs {
				if strings.Contains(err.Error(), tc.want) {
					return
				}
			}
			t.Errorf("breaking %s: no problem mentions %q; problems:\n%v", tc.file, tc.want, errors.Join(errs...))
		})
	}
}
