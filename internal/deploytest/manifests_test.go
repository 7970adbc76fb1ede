package deploytest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/yaml"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
)

// The kustomization roots that are deployed.
const (
	// The product only: no MCP server container, no example plugin.
	baseDir = "manifests/base"
	// base with the echo server and the demo policy
	// (manifests/overlays/examples), on kind.
	kindDir  = "manifests/overlays/kind"
	istioDir = "manifests/istio"
	// An example on top of base: plugins over gRPC and a Unix socket.
	transportsDir = "manifests/examples/plugin-transports"
)

// Defaults of the binaries' flags (cmd/extproc, cmd/example-plugin): a
// container that does not set the flag listens there.
const (
	extprocGRPCAddr    = ":50052"
	extprocAdminAddr   = ":9090"
	extprocGracePeriod = 10 * time.Second
	pluginAddr         = ":8000"
)

// Image names (the last path element) that identify the project's
// containers; anything else in a Pod with Envoy is the MCP server.
const (
	imageExtproc = "mcp-extproc"
	imagePlugin  = "mcp-extproc-example-plugin"
	imageEcho    = "mcp-echo"
	imageEnvoy   = "envoyproxy/envoy"
)

// rendered is one kustomization root (or one helm render), built and
// strictly decoded.
type rendered struct {
	dir string
	// productOnly: the Pod with Envoy has no MCP server container yet (the
	// user adds it), and no example image may appear.
	productOnly bool
	// strictRollout: every mounted ConfigMap must roll the Pods on a
	// change, extproc's live-reloaded config included (the helm chart).
	strictRollout bool
	deployments   []*appsv1.Deployment
	services      []*corev1.Service
	configMaps    []*corev1.ConfigMap
	namespaces    []*corev1.Namespace
	pdbs          []*policyv1.PodDisruptionBudget
	envoyFilters  []*envoyFilter
	destRules     []*destinationRule
	rules         []*prometheusRule
	netPolicies   []*networkingv1.NetworkPolicy
	podMonitors   []*podMonitor
	svcMonitors   []*serviceMonitor
}

// envoyFilter is the part of Istio's networking.istio.io/v1alpha3
// EnvoyFilter that these manifests may use; decoding is strict, so a field
// outside it (or a misspelt one) is reported.
type envoyFilter struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		WorkloadSelector *struct {
			Labels map[string]string `json:"labels"`
		} `json:"workloadSelector,omitempty"`
		Priority      int32              `json:"priority,omitempty"`
		ConfigPatches []envoyConfigPatch `json:"configPatches"`
	} `json:"spec"`
}

// prometheusRule is the Prometheus Operator's PrometheusRule (for alert
// examples), decoded strictly.
type prometheusRule struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		Groups []struct {
			Name     string `json:"name"`
			Interval string `json:"interval,omitempty"`
			Rules    []struct {
				Alert         string            `json:"alert,omitempty"`
				Record        string            `json:"record,omitempty"`
				Expr          string            `json:"expr"`
				For           string            `json:"for,omitempty"`
				KeepFiringFor string            `json:"keep_firing_for,omitempty"`
				Labels        map[string]string `json:"labels,omitempty"`
				Annotations   map[string]string `json:"annotations,omitempty"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

type envoyConfigPatch struct {
	ApplyTo string `json:"applyTo"`
	Match   *struct {
		Context string `json:"context,omitempty"`
		Proxy   *struct {
			ProxyVersion string            `json:"proxyVersion,omitempty"`
			Metadata     map[string]string `json:"metadata,omitempty"`
		} `json:"proxy,omitempty"`
		Listener *struct {
			PortNumber  uint32 `json:"portNumber,omitempty"`
			Name        string `json:"name,omitempty"`
			FilterChain *struct {
				Name                 string `json:"name,omitempty"`
				Sni                  string `json:"sni,omitempty"`
				TransportProtocol    string `json:"transportProtocol,omitempty"`
				ApplicationProtocols string `json:"applicationProtocols,omitempty"`
				DestinationPort      uint32 `json:"destinationPort,omitempty"`
				Filter               *struct {
					Name      string `json:"name"`
					SubFilter *struct {
						Name string `json:"name"`
					} `json:"subFilter,omitempty"`
				} `json:"filter,omitempty"`
			} `json:"filterChain,omitempty"`
		} `json:"listener,omitempty"`
		Cluster *struct {
			PortNumber uint32 `json:"portNumber,omitempty"`
			Service    string `json:"service,omitempty"`
			Subset     string `json:"subset,omitempty"`
			Name       string `json:"name,omitempty"`
		} `json:"cluster,omitempty"`
	} `json:"match,omitempty"`
	Patch struct {
		Operation   string          `json:"operation"`
		Value       json.RawMessage `json:"value,omitempty"`
		FilterClass string          `json:"filterClass,omitempty"`
	} `json:"patch"`
}

// decodeStrict decodes JSON into v; unknown fields are errors.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data")
	}
	return nil
}

// renderer builds kustomizations and remembers the results, keyed by the
// content of every file a build can read, so the broken-copy tests rebuild
// only the roots whose inputs they changed. The results are read-only.
type renderer struct {
	mu    sync.Mutex
	cache map[string]renderResult
}

type renderResult struct {
	r    *rendered
	errs []error
}

func newRenderer() *renderer { return &renderer{cache: map[string]renderResult{}} }

// render is [render] through the cache.
func (rd *renderer) render(s snapshot, dir string) (*rendered, []error) {
	key := dir + "\x00" + closureDigest(s, dir)
	rd.mu.Lock()
	res, ok := rd.cache[key]
	rd.mu.Unlock()
	if ok {
		return res.r, res.errs
	}
	r, errs := render(s, dir)
	rd.mu.Lock()
	rd.cache[key] = renderResult{r, errs}
	rd.mu.Unlock()
	return r, errs
}

// closureDigest hashes every file under dir and under each directory its
// kustomization lists in resources or components, recursively: all that a
// build of dir can read.
func closureDigest(s snapshot, dir string) string {
	dirs := map[string]bool{}
	var walk func(d string)
	walk = func(d string) {
		if dirs[d] {
			return
		}
		dirs[d] = true
		var k struct {
			Resources  []string `json:"resources"`
			Components []string `json:"components"`
		}
		if err := yaml.Unmarshal(s.file(path.Join(d, "kustomization.yaml")), &k); err != nil {
			return // render reports it
		}
		for _, ref := range append(k.Resources, k.Components...) {
			walk(path.Join(d, ref))
		}
	}
	walk(dir)
	var names []string
	for name := range s.files {
		for d := range dirs {
			if strings.HasPrefix(name, d+"/") {
				names = append(names, name)
				break
			}
		}
	}
	slices.Sort(names)
	h := sha256.New()
	for _, name := range names {
		fmt.Fprintf(h, "%s\x00%d\x00", name, len(s.files[name]))
		h.Write(s.files[name])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// render builds the kustomization at dir (as `kubectl apply -k` would, with
// the loader restricted to each kustomization's root) and decodes every
// resource strictly into its Kubernetes type.
func render(s snapshot, dir string) (*rendered, []error) {
	fsys, err := s.fs()
	if err != nil {
		return nil, []error{err}
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fsys, path.Join(fsRoot, dir))
	if err != nil {
		return nil, []error{fmt.Errorf("kustomize build %s: %w", dir, err)}
	}
	r := &rendered{dir: dir, productOnly: dir == baseDir}
	var errs []error
	for _, res := range m.Resources() {
		js, err := res.MarshalJSON()
		where := fmt.Sprintf("%s: %s %s", dir, res.GetKind(), res.GetName())
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			continue
		}
		errs = append(errs, r.add(where, res.GetApiVersion()+" "+res.GetKind(), js)...)
	}
	return r, errs
}

// ---- small helpers ----------------------------------------------------------

// flagValue returns the value of flag name in args, written -name or
// --name, followed by "=value" or by the value as the next argument.
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		for _, p := range []string{"--" + name, "-" + name} {
			if a == p && i+1 < len(args) {
				return args[i+1], true
			}
			if v, ok := strings.CutPrefix(a, p+"="); ok {
				return v, true
			}
		}
	}
	return "", false
}

// envValue returns the literal value of an environment variable of c.
func envValue(c *corev1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom == nil {
			return e.Value, true
		}
	}
	return "", false
}

// setting returns a flag, else its environment variable, else def.
func setting(c *corev1.Container, flag, env, def string) string {
	if v, ok := flagValue(c.Args, flag); ok {
		return v
	}
	if v, ok := envValue(c, env); ok && env != "" {
		return v
	}
	return def
}

// listenAddr splits a listen address such as ":50052" or "127.0.0.1:3000".
func listenAddr(addr string) (host string, port int32, err error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("port of %q: %w", addr, err)
	}
	return h, int32(n), nil
}

// imageName is an image reference without tag or digest, without docker.io/.
func imageName(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	ref = strings.TrimPrefix(ref, "docker.io/")
	return strings.TrimPrefix(ref, "library/")
}

// imageBase is the last path element of an image name.
func imageBase(ref string) string { return path.Base(imageName(ref)) }

// imageTag is the tag of an image reference ("" if none).
func imageTag(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[i+1:]
	}
	return ""
}

// containers lists the init containers (native sidecars included), then the
// containers of a Pod.
func containers(spec *corev1.PodSpec) []*corev1.Container {
	var out []*corev1.Container
	for i := range spec.InitContainers {
		out = append(out, &spec.InitContainers[i])
	}
	for i := range spec.Containers {
		out = append(out, &spec.Containers[i])
	}
	return out
}

// resolvePort resolves a named or numbered port against a container.
func resolvePort(c *corev1.Container, p intstr.IntOrString) (int32, bool) {
	for _, cp := range c.Ports {
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return cp.ContainerPort, true
		}
	}
	return 0, false
}

// hasPort reports whether a container declares port n.
func hasPort(c *corev1.Container, n int32) bool {
	_, ok := resolvePort(c, intstr.FromInt32(n))
	return ok
}

// probes lists the probes of a container with their kind.
func probes(c *corev1.Container) map[string]*corev1.Probe {
	out := map[string]*corev1.Probe{}
	if c.StartupProbe != nil {
		out["startupProbe"] = c.StartupProbe
	}
	if c.ReadinessProbe != nil {
		out["readinessProbe"] = c.ReadinessProbe
	}
	if c.LivenessProbe != nil {
		out["livenessProbe"] = c.LivenessProbe
	}
	return out
}

// probePort is the port a probe targets.
func probePort(p *corev1.Probe) (intstr.IntOrString, bool) {
	switch {
	case p.HTTPGet != nil:
		return p.HTTPGet.Port, true
	case p.TCPSocket != nil:
		return p.TCPSocket.Port, true
	case p.GRPC != nil:
		return intstr.FromInt32(p.GRPC.Port), true
	}
	return intstr.IntOrString{}, false
}

// preStopSleep is the preStop sleep of a container, if any.
func preStopSleep(c *corev1.Container) time.Duration {
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
		return time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	}
	return 0
}

// ---- checks -----------------------------------------------------------------

// pod is one Deployment's Pod template, with the project containers found.
type pod struct {
	where   string
	d       *appsv1.Deployment
	spec    *corev1.PodSpec
	extproc *extprocFacts
	envoy   *corev1.Container
	servers []*corev1.Container // the other containers of an Envoy Pod
	// stats is Envoy's stats listener (port, path) once the bootstrap
	// checked; zero without Envoy.
	stats   statsEndpoint
	mcpPort uint32 // Envoy's MCP listener
}

// extprocFacts are what a checked extproc container says about itself.
type extprocFacts struct {
	c                   *corev1.Container
	cfg                 *config.Config
	grpcPort, adminPort int32
	grace               time.Duration
}

// checkRendered runs every check on one rendered root and returns the Pods
// found, for the checks that span roots.
func checkRendered(s snapshot, r *rendered) ([]*pod, []error) {
	var p problems
	var pods []*pod
	for _, d := range r.deployments {
		pd := &pod{where: fmt.Sprintf("%s: Deployment %s", r.dir, d.Name), d: d, spec: &d.Spec.Template.Spec}
		pods = append(pods, pd)
		checkPod(s, r, pd, &p)
		checkConfigRollout(r, pd, r.strictRollout, &p)
	}
	for _, svc := range r.services {
		checkService(r, svc, &p)
	}
	var extprocs []*extprocFacts
	for _, pd := range pods {
		if pd.extproc != nil {
			extprocs = append(extprocs, pd.extproc)
			checkPluginURLs(r, pd, &p)
		}
	}
	for _, ef := range r.envoyFilters {
		if len(extprocs) != 1 {
			p.addf("%s: EnvoyFilter %s: want one extproc Deployment beside it, found %d", r.dir, ef.Metadata.Name, len(extprocs))
			continue
		}
		checkEnvoyFilter(r, ef, extprocs[0], &p)
	}
	for _, dr := range r.destRules {
		checkDestinationRule(r, dr, &p)
	}
	checkMonitors(r, pods, &p)
	checkNetworkPolicies(r, pods, &p)
	for _, pdb := range r.pdbs {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			p.addf("%s: PodDisruptionBudget %s: %v", r.dir, pdb.Name, err)
			continue
		}
		if len(selectPods(r, pdb.Namespace, sel)) == 0 {
			p.addf("%s: PodDisruptionBudget %s selects no Deployment's Pods", r.dir, pdb.Name)
		}
	}
	return pods, p.errs
}

// checkPod checks one Deployment: selector, security, resources, probes,
// volumes, and what its project containers need.
func checkPod(s snapshot, r *rendered, pd *pod, p *problems) {
	d, spec := pd.d, pd.spec
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		p.addf("%s: spec.selector does not match the Pod template's labels", pd.where)
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		p.addf("%s: uses the host's namespaces", pd.where)
	}
	volumes := map[string]*corev1.Volume{}
	for i := range spec.Volumes {
		v := &spec.Volumes[i]
		volumes[v.Name] = v
		if v.ConfigMap != nil && findConfigMap(r, d.Namespace, v.ConfigMap.Name) == nil {
			p.addf("%s: volume %s: ConfigMap %s is not part of the deployment", pd.where, v.Name, v.ConfigMap.Name)
		}
	}
	for _, c := range containers(spec) {
		where := fmt.Sprintf("%s: container %s", pd.where, c.Name)
		p.addAll(where, checkSecurity(spec, c))
		p.addAll(where, checkResources(c))
		for kind, pr := range probes(c) {
			port, ok := probePort(pr)
			if !ok {
				p.addf("%s: %s has no httpGet, tcpSocket or grpc action", where, kind)
				continue
			}
			if _, ok := resolvePort(c, port); !ok {
				p.addf("%s: %s port %s is not a port of the container", where, kind, port.String())
			}
		}
		for _, cp := range c.Ports {
			if cp.Name != "" && !validPortName(cp.Name) {
				p.addf("%s: port name %q is not an IANA service name (at most 15 of a-z, 0-9, '-', with a letter)", where, cp.Name)
			}
		}
		for _, m := range c.VolumeMounts {
			if volumes[m.Name] == nil {
				p.addf("%s: volumeMount %s names no volume", where, m.Name)
			}
		}
		switch {
		case imageName(c.Image) == imageEnvoy:
			pd.envoy = c
		case imageBase(c.Image) == imageExtproc:
			pd.extproc = checkExtprocContainer(r, pd, c, where, p)
		case imageBase(c.Image) == imagePlugin:
			checkPluginContainer(c, where, p)
		default:
			pd.servers = append(pd.servers, c)
		}
	}
	if pd.envoy != nil {
		checkEnvoyContainer(s, r, pd, p)
	}
	if pd.extproc != nil {
		checkGracePeriod(pd, p)
	}
}

// Patterns of the checks (compiled once, never changed).
var (
	portNameRE     = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)
	envoyVersionRE = regexp.MustCompile(`^v\d+\.\d+\.\d+$`)
)

// validPortName reports whether a container port name is a valid
// IANA_SVC_NAME, as the API server requires.
func validPortName(n string) bool {
	return len(n) <= 15 && portNameRE.MatchString(n) &&
		!strings.Contains(n, "--") && strings.ContainsAny(n, "abcdefghijklmnopqrstuvwxyz")
}

// checkSecurity checks the restricted Pod Security rules for one container.
func checkSecurity(spec *corev1.PodSpec, c *corev1.Container) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	psc := spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	sc := c.SecurityContext
	if sc == nil {
		sc = &corev1.SecurityContext{}
	}
	nonRoot := psc.RunAsNonRoot
	if sc.RunAsNonRoot != nil {
		nonRoot = sc.RunAsNonRoot
	}
	if nonRoot == nil || !*nonRoot {
		bad("securityContext: runAsNonRoot must be true")
	}
	user := psc.RunAsUser
	if sc.RunAsUser != nil {
		user = sc.RunAsUser
	}
	if user != nil && *user == 0 {
		bad("securityContext: runAsUser 0 (root)")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		bad("securityContext: readOnlyRootFilesystem must be true")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		bad("securityContext: allowPrivilegeEscalation must be false")
	}
	if sc.Privileged != nil && *sc.Privileged {
		bad("securityContext: privileged")
	}
	if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		bad("securityContext: capabilities must drop ALL")
	} else if len(sc.Capabilities.Add) > 0 {
		bad("securityContext: capabilities adds %v", sc.Capabilities.Add)
	}
	seccomp := psc.SeccompProfile
	if sc.SeccompProfile != nil {
		seccomp = sc.SeccompProfile
	}
	if seccomp == nil || (seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault && seccomp.Type != corev1.SeccompProfileTypeLocalhost) {
		bad("securityContext: seccompProfile must be RuntimeDefault")
	}
	return errs
}

// checkResources wants CPU and memory requests and a memory limit.
func checkResources(c *corev1.Container) []error {
	var errs []error
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := c.Resources.Requests[name]; !ok || q.IsZero() {
			errs = append(errs, fmt.Errorf("resources: no %s request", name))
		}
	}
	if q, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok || q.IsZero() {
		errs = append(errs, fmt.Errorf("resources: no memory limit"))
	}
	return errs
}

func findConfigMap(r *rendered, ns, name string) *corev1.ConfigMap {
	for _, cm := range r.configMaps {
		if cm.Name == name && cm.Namespace == ns {
			return cm
		}
	}
	return nil
}

// mountedFile returns the content of the file at path in container c, when
// it comes from a ConfigMap volume.
func mountedFile(r *rendered, pd *pod, c *corev1.Container, file string) ([]byte, error) {
	for _, m := range c.VolumeMounts {
		key := ""
		switch {
		case m.SubPath != "" && m.MountPath == file:
			key = m.SubPath
		case m.SubPath == "" && path.Dir(file) == path.Clean(m.MountPath):
			key = path.Base(file)
		default:
			continue
		}
		var vol *corev1.Volume
		for i := range pd.spec.Volumes {
			if pd.spec.Volumes[i].Name == m.Name {
				vol = &pd.spec.Volumes[i]
			}
		}
		if vol == nil || vol.ConfigMap == nil {
			return nil, fmt.Errorf("%s is mounted from %s, not from a ConfigMap", file, m.Name)
		}
		for _, it := range vol.ConfigMap.Items {
			if it.Path == key {
				key = it.Key
			}
		}
		cm := findConfigMap(r, pd.d.Namespace, vol.ConfigMap.Name)
		if cm == nil {
			return nil, fmt.Errorf("%s: ConfigMap %s is not part of the deployment", file, vol.ConfigMap.Name)
		}
		data, ok := cm.Data[key]
		if !ok {
			return nil, fmt.Errorf("%s: ConfigMap %s has no key %q", file, cm.Name, key)
		}
		return []byte(data), nil
	}
	return nil, fmt.Errorf("%s is not in a mounted ConfigMap volume", file)
}

// checkConfigFilesMounted checks that the files the config names, which
// are read in the Pod (not here), lie in a volume mounted into c.
func checkConfigFilesMounted(cfg *config.Config, c *corev1.Container, where string, p *problems) {
	r := cfg.Extproc.Attribution.Redis
	if r == nil || r.PasswordFile == "" {
		return
	}
	for _, m := range c.VolumeMounts {
		if strings.HasPrefix(r.PasswordFile, strings.TrimSuffix(m.MountPath, "/")+"/") {
			return
		}
	}
	p.addf("%s: extproc.attribution.redis.password_file %s is in no volume mounted into the container", where, r.PasswordFile)
}

// checkExtprocContainer checks the extproc container: its config file is
// mounted and valid, its ports and probes match its flags.
func checkExtprocContainer(r *rendered, pd *pod, c *corev1.Container, where string, p *problems) *extprocFacts {
	f := &extprocFacts{c: c, grace: extprocGracePeriod}
	cfgPath := setting(c, "config", "EXTPROC_CONFIG", "")
	if cfgPath == "" {
		p.addf("%s: no --config", where)
	} else if data, err := mountedFile(r, pd, c, cfgPath); err != nil {
		p.addf("%s: --config: %v", where, err)
	} else if slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.SubPath != "" && m.MountPath == cfgPath }) {
		p.addf("%s: --config %s is mounted with subPath: ConfigMap updates never reach it, so the live reload cannot happen", where, cfgPath)
	} else if cfg, err := config.ParseWith(data, nil, config.Options{SkipFiles: true}); err != nil {
		p.addf("%s: --config %s is not a valid configuration:\n%v", where, cfgPath, err)
	} else {
		f.cfg = cfg
		checkConfigFilesMounted(cfg, c, where, p)
		if cfg.PluginSettings.Timeout() >= cfg.HookTimeout() {
			p.addf("%s: plugin_timeout %v must stay below extproc.hook_timeout %v", where, cfg.PluginSettings.Timeout(), cfg.HookTimeout())
		}
	}
	for _, a := range []struct {
		flag, env, def string
		port           *int32
	}{
		{"grpc-addr", "EXTPROC_GRPC_ADDR", extprocGRPCAddr, &f.grpcPort},
		{"admin-addr", "EXTPROC_ADMIN_ADDR", extprocAdminAddr, &f.adminPort},
	} {
		addr := setting(c, a.flag, a.env, a.def)
		_, port, err := listenAddr(addr)
		if err != nil {
			p.addf("%s: --%s: %v", where, a.flag, err)
			continue
		}
		*a.port = port
		if !hasPort(c, port) {
			p.addf("%s: --%s %s: port %d is not a container port", where, a.flag, addr, port)
		}
	}
	if g, ok := flagValue(c.Args, "grace-period"); ok {
		d, err := time.ParseDuration(g)
		if err != nil {
			p.addf("%s: --grace-period: %v", where, err)
		}
		f.grace = d
	}
	grpcProbe := false
	for _, pr := range probes(c) {
		if pr.GRPC != nil && pr.GRPC.Port == f.grpcPort {
			grpcProbe = true
		}
	}
	if !grpcProbe {
		p.addf("%s: no grpc probe on the gRPC port %d (grpc.health.v1)", where, f.grpcPort)
	}
	for _, want := range []struct {
		kind, path string
		probe      *corev1.Probe
	}{
		{"readinessProbe", "/readyz", c.ReadinessProbe},
		{"livenessProbe", "/healthz", c.LivenessProbe},
	} {
		pr := want.probe
		if pr == nil || pr.HTTPGet == nil {
			p.addf("%s: %s must be an httpGet of %s on the admin port", where, want.kind, want.path)
			continue
		}
		port, _ := resolvePort(c, pr.HTTPGet.Port)
		if pr.HTTPGet.Path != want.path || port != f.adminPort {
			p.addf("%s: %s is GET %s on port %d, want %s on the admin port %d", where, want.kind, pr.HTTPGet.Path, port, want.path, f.adminPort)
		}
	}
	return f
}

// checkPluginContainer checks the example plugin's listen port.
func checkPluginContainer(c *corev1.Container, where string, p *problems) {
	addr := setting(c, "addr", "", pluginAddr)
	_, port, err := listenAddr(addr)
	if err != nil {
		p.addf("%s: --addr: %v", where, err)
		return
	}
	if !hasPort(c, port) {
		p.addf("%s: --addr %s: port %d is not a container port", where, addr, port)
	}
}

// checkEnvoyContainer checks the Envoy sidecar: pinned image, the mounted
// bootstrap is envoy/envoy.yaml and passes checkBootstrap against the
// extproc configuration of the same Pod, and the ports, probes and servers
// agree with it.
func checkEnvoyContainer(s snapshot, r *rendered, pd *pod, p *problems) {
	c := pd.envoy
	where := fmt.Sprintf("%s: container %s", pd.where, c.Name)
	if !envoyVersionRE.MatchString(imageTag(c.Image)) && !strings.Contains(c.Image, "@sha256:") {
		p.addf("%s: image %s: pin an exact Envoy version (vX.Y.Z) or digest", where, c.Image)
	}
	file := ""
	if v, ok := flagValue(c.Args, "c"); ok {
		file = v
	} else if v, ok := flagValue(c.Args, "config-path"); ok {
		file = v
	}
	if file == "" {
		p.addf("%s: no -c bootstrap file", where)
		return
	}
	data, err := mountedFile(r, pd, c, file)
	if err != nil {
		p.addf("%s: -c: %v", where, err)
		return
	}
	if !bytes.Equal(data, s.file("envoy/envoy.yaml")) {
		p.addf("%s: -c %s differs from envoy/envoy.yaml (generate the ConfigMap from that file)", where, file)
	}
	if pd.extproc == nil || pd.extproc.cfg == nil {
		p.addf("%s: Envoy needs a valid extproc sidecar in the same Pod", where)
		return
	}
	ex := pd.extproc
	facts, errs := checkBootstrap(data, limitsOf(ex.cfg))
	p.addAll(where+": "+file, errs)
	if !facts.decoded {
		return
	}

	if facts.extproc.port != 0 && facts.extproc.port != uint32(ex.grpcPort) {
		p.addf("%s: the ext_proc cluster targets port %d, the extproc sidecar listens on %d", where, facts.extproc.port, ex.grpcPort)
	}
	pd.stats, pd.mcpPort = facts.stats, facts.mcpPort
	if facts.stats.port != 0 && !hasPort(c, int32(facts.stats.port)) {
		p.addf("%s: the stats listener port %d is not a container port: Prometheus cannot scrape Envoy", where, facts.stats.port)
	}
	if facts.mcpPort != 0 && !hasPort(c, int32(facts.mcpPort)) {
		p.addf("%s: the MCP listener port %d is not a container port", where, facts.mcpPort)
	}
	if rp := c.ReadinessProbe; rp == nil || rp.HTTPGet == nil {
		p.addf("%s: readinessProbe must be an httpGet of the health check listener", where)
	} else if port, _ := resolvePort(c, rp.HTTPGet.Port); uint32(port) != facts.readyPort || rp.HTTPGet.Path != facts.readyPath {
		p.addf("%s: readinessProbe is GET %s on port %d, Envoy answers health checks at %s on port %d",
			where, rp.HTTPGet.Path, port, facts.readyPath, facts.readyPort)
	}
	for _, up := range facts.upstreams {
		if r.productOnly && len(pd.servers) == 0 {
			break // the user's server container is added by an overlay
		}
		if !isLoopback(up.host) {
			p.addf("%s: upstream %s is not in the Pod (loopback)", where, up)
			continue
		}
		found := false
		for _, sc := range pd.servers {
			addr, ok := flagValue(sc.Args, "addr")
			if !ok {
				continue
			}
			host, port, err := listenAddr(addr)
			if err != nil || uint32(port) != up.port {
				continue
			}
			found = true
			if !isLoopback(host) {
				p.addf("%s: container %s listens on %s: reachable around Envoy; bind it to 127.0.0.1", pd.where, sc.Name, addr)
			}
		}
		if !found {
			p.addf("%s: no server container listens (--addr=127.0.0.1:%d) on the upstream port %d", pd.where, up.port, up.port)
		}
	}
	if len(facts.upstreamHCPaths) == 0 {
		p.addf("%s: the upstream cluster has no active health check: nothing reports a dead MCP server", where)
	}
	if !isNativeSidecar(pd.spec, ex.c) {
		p.addf("%s: run extproc as a native sidecar (initContainers, restartPolicy Always) so it starts before and stops after Envoy", pd.where)
	}
}

// isNativeSidecar reports whether c is an init container that keeps running.
func isNativeSidecar(spec *corev1.PodSpec, c *corev1.Container) bool {
	for _, ic := range spec.InitContainers {
		if ic.Name == c.Name && ic.RestartPolicy != nil && *ic.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			return true
		}
	}
	return false
}

// checkGracePeriod checks that a Pod with extproc gives it time to drain:
// a native sidecar is stopped only after the other containers (and their
// preStop sleeps); then its own preStop and --grace-period run.
func checkGracePeriod(pd *pod, p *problems) {
	ex := pd.extproc
	var before time.Duration
	if isNativeSidecar(pd.spec, ex.c) {
		for i := range pd.spec.Containers {
			before = max(before, preStopSleep(&pd.spec.Containers[i]))
		}
	}
	need := before + preStopSleep(ex.c) + ex.grace
	if g := pd.spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= need {
		p.addf("%s: terminationGracePeriodSeconds must exceed the preStop sleeps (%v) plus extproc's grace period (%v)",
			pd.where, need-ex.grace, ex.grace)
	}
}

// selectPods lists the Pods (of Deployments in namespace ns) sel selects.
func selectPods(r *rendered, ns string, sel labels.Selector) []*appsv1.Deployment {
	var out []*appsv1.Deployment
	for _, d := range r.deployments {
		if d.Namespace == ns && sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			out = append(out, d)
		}
	}
	return out
}

// checkService checks that a Service selects Pods and that every target
// port is a port of them; a Service in front of Envoy must not expose the
// MCP server or the ext_proc port around it.
func checkService(r *rendered, svc *corev1.Service, p *problems) {
	where := fmt.Sprintf("%s: Service %s", r.dir, svc.Name)
	if len(svc.Spec.Selector) == 0 {
		p.addf("%s: no selector", where)
		return
	}
	pods := selectPods(r, svc.Namespace, labels.SelectorFromSet(svc.Spec.Selector))
	if len(pods) == 0 {
		p.addf("%s: selects no Deployment's Pods", where)
	}
	for _, d := range pods {
		cs := containers(&d.Spec.Template.Spec)
		hasEnvoy := slices.ContainsFunc(cs, func(c *corev1.Container) bool { return imageName(c.Image) == imageEnvoy })
		for _, sp := range svc.Spec.Ports {
			tp := sp.TargetPort
			if tp.Type == intstr.Int && tp.IntVal == 0 {
				tp = intstr.FromInt32(sp.Port)
			}
			var owner *corev1.Container
			for _, c := range cs {
				if _, ok := resolvePort(c, tp); ok {
					owner = c
					break
				}
			}
			switch {
			case owner == nil:
				p.addf("%s: port %s targets %s, which no container of Deployment %s declares", where, sp.Name, tp.String(), d.Name)
			case !hasEnvoy || imageName(owner.Image) == imageEnvoy:
			case imageBase(owner.Image) == imageExtproc:
				// Its admin port (metrics) may be exposed, not its gRPC port.
				_, admin, _ := listenAddr(setting(owner, "admin-addr", "EXTPROC_ADMIN_ADDR", extprocAdminAddr))
				if n, _ := resolvePort(owner, tp); n != admin {
					p.addf("%s: port %s exposes container %s around Envoy", where, sp.Name, owner.Name)
				}
			default:
				p.addf("%s: port %s exposes container %s around Envoy", where, sp.Name, owner.Name)
			}
		}
	}
}

// checkPluginURLs checks that every in-cluster plugin URL of the extproc
// configuration names a Service of the deployment, and a port of it, with
// no ClientIP session affinity.
func checkPluginURLs(r *rendered, pd *pod, p *problems) {
	if pd.extproc.cfg == nil {
		return
	}
	for _, pl := range pd.extproc.cfg.Plugins {
		if pl.MCP == nil || pl.MCP.URL == "" {
			continue
		}
		where := fmt.Sprintf("%s: plugin %s: url %s", pd.where, pl.Name, pl.MCP.URL)
		u, err := url.Parse(pl.MCP.URL)
		if err != nil {
			p.addf("%s: %v", where, err)
			continue
		}
		parts := strings.Split(strings.TrimSuffix(u.Hostname(), ".svc.cluster.local"), ".")
		name, ns := parts[0], pd.d.Namespace
		switch {
		case len(parts) == 1:
		case len(parts) == 2 || (len(parts) == 3 && parts[2] == "svc"):
			ns = parts[1]
		default:
			continue // outside the cluster
		}
		port := 80
		if u.Scheme == "https" {
			port = 443
		}
		if u.Port() != "" {
			port, _ = strconv.Atoi(u.Port())
		}
		var svc *corev1.Service
		for _, s := range r.services {
			if s.Name == name && s.Namespace == ns {
				svc = s
			}
		}
		if svc == nil {
			p.addf("%s: no Service %s in namespace %q", where, name, ns)
			continue
		}
		if !slices.ContainsFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool { return int(sp.Port) == port }) {
			p.addf("%s: Service %s has no port %d", where, name, port)
		}
		// The sidecar pins each plugin session to its own connection, so
		// a plain Service works; ClientIP affinity would send all of one
		// sidecar's sessions to one replica.
		if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
			p.addf("%s: Service %s sets sessionAffinity ClientIP, which pins each sidecar to one plugin replica; plugin sessions need no affinity", where, name)
		}
	}
}

// checkEnvoyFilter checks the Istio EnvoyFilter: its ext_proc filter passes
// the same checks as the sidecar bootstrap's, it goes before the router, and
// its cluster is HTTP/2 and reaches the extproc Service.
func checkEnvoyFilter(r *rendered, ef *envoyFilter, ex *extprocFacts, p *problems) {
	where := fmt.Sprintf("%s: EnvoyFilter %s", r.dir, ef.Metadata.Name)
	if ex.cfg == nil {
		p.addf("%s: the extproc configuration is not valid", where)
		return
	}
	if ef.Spec.WorkloadSelector == nil || len(ef.Spec.WorkloadSelector.Labels) == 0 {
		p.addf("%s: no workloadSelector: it would patch every proxy in its namespace", where)
	}
	var filterCluster string
	var filter *extprocv3.ExternalProcessor
	removed := map[string]bool{} // by header_mutation patches (identity_test.go)
	clusters := map[string]*envoyConfigPatch{}
	nFilters := 0
	for i := range ef.Spec.ConfigPatches {
		cp := &ef.Spec.ConfigPatches[i]
		pw := fmt.Sprintf("%s: configPatches[%d]", where, i)
		switch cp.ApplyTo {
		case "HTTP_FILTER":
			if rm, ok, err := istioRemovedHeaders(cp); ok {
				p.add(pw, err)
				maps.Copy(removed, rm)
				continue
			}
			nFilters++
			m := cp.Match
			if m == nil || m.Context != "GATEWAY" || m.Listener == nil || m.Listener.FilterChain == nil ||
				m.Listener.FilterChain.Filter == nil || m.Listener.FilterChain.Filter.Name != "envoy.filters.network.http_connection_manager" ||
				m.Listener.FilterChain.Filter.SubFilter == nil || m.Listener.FilterChain.Filter.SubFilter.Name != routerFilter {
				p.addf("%s: match the gateway's http_connection_manager, subFilter %s", pw, routerFilter)
			}
			if cp.Patch.Operation != "INSERT_BEFORE" {
				p.addf("%s: operation %s, want INSERT_BEFORE (ext_proc must run before the router)", pw, cp.Patch.Operation)
			}
			hf := &hcmv3.HttpFilter{}
			if err := decodeProtoJSON(cp.Patch.Value, hf); err != nil {
				p.addf("%s: patch.value: %v", pw, err)
				continue
			}
			ep := &extprocv3.ExternalProcessor{}
			if hf.GetName() != extProcFilter || !hf.GetTypedConfig().MessageIs(ep) {
				p.addf("%s: patch.value is not the %s filter", pw, extProcFilter)
				continue
			}
			if err := hf.GetTypedConfig().UnmarshalTo(ep); err != nil {
				p.addf("%s: %v", pw, err)
				continue
			}
			_, cl, errs := checkExtProc(ep, limitsOf(ex.cfg))
			p.addAll(pw, errs)
			filterCluster, filter = cl, ep
		case "CLUSTER":
			if cp.Patch.Operation != "ADD" {
				p.addf("%s: operation %s, want ADD", pw, cp.Patch.Operation)
				continue
			}
			c := &clusterv3.Cluster{}
			if err := decodeProtoJSON(cp.Patch.Value, c); err != nil {
				p.addf("%s: patch.value: %v", pw, err)
				continue
			}
			if err := checkHTTP2Cluster(c); err != nil {
				p.addf("%s: %v", pw, err)
			}
			clusters[c.GetName()] = cp
			for _, hp := range clusterEndpoints(c) {
				checkClusterEndpoint(r, c, hp, ex, pw, p)
			}
		default:
			p.addf("%s: unexpected applyTo %s", pw, cp.ApplyTo)
		}
	}
	if nFilters != 1 {
		p.addf("%s: want one HTTP_FILTER patch, found %d", where, nFilters)
	}
	if filter != nil {
		p.addAll(where, checkIdentityForwarding(filter, removed, ex.cfg.Extproc.Identity))
		p.addAll(where, checkDecisionMetadata(filter))
	}
	if filterCluster != "" && clusters[filterCluster] == nil {
		p.addf("%s: the ext_proc cluster %q is not added by a CLUSTER patch", where, filterCluster)
	}
}

// checkClusterEndpoint checks that a gateway cluster endpoint is the DNS
// name of the extproc Service and a port that reaches its gRPC port.
func checkClusterEndpoint(r *rendered, c *clusterv3.Cluster, hp hostPort, ex *extprocFacts, where string, p *problems) {
	name, rest, _ := strings.Cut(hp.host, ".")
	ns, _, _ := strings.Cut(rest, ".")
	if !strings.HasSuffix(hp.host, ".svc.cluster.local") {
		p.addf("%s: endpoint %s: use the Service's full DNS name", where, hp)
		return
	}
	var svc *corev1.Service
	for _, s := range r.services {
		if s.Name == name && s.Namespace == ns {
			svc = s
		}
	}
	if svc == nil {
		p.addf("%s: endpoint %s: no Service %s in namespace %s", where, hp, name, ns)
		return
	}
	for _, sp := range svc.Spec.Ports {
		if uint32(sp.Port) != hp.port {
			continue
		}
		tp := sp.TargetPort
		if tp.Type == intstr.Int && tp.IntVal == 0 {
			tp = intstr.FromInt32(sp.Port)
		}
		if n, ok := resolvePort(ex.c, tp); !ok || n != ex.grpcPort {
			p.addf("%s: endpoint %s reaches port %s of Service %s, not the extproc gRPC port %d", where, hp, tp.String(), name, ex.grpcPort)
		}
		if c.GetType() == clusterv3.Cluster_STRICT_DNS && svc.Spec.ClusterIP != corev1.ClusterIPNone {
			p.addf("%s: Service %s must be headless (clusterIP: None) so STRICT_DNS balances streams across Pods", where, name)
		}
		return
	}
	p.addf("%s: endpoint %s: Service %s has no port %d", where, hp, name, hp.port)
}
