package deploytest

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
)

// checkedRoots are the kustomization roots checkAll renders and checks.
// manifests/overlays/examples is not among them: kindDir and transportsDir
// hold all of it and are checked (one root less to rebuild for every broken
// copy); TestEveryKustomizationRenders builds it.
var checkedRoots = []string{baseDir, kindDir, istioDir, transportsDir, gatewayRedisDir}

// checkAll runs every check on a snapshot and returns every problem.
func checkAll(s snapshot, rd *renderer) []error {
	var p problems
	var renders []*rendered
	podsOf := map[string][]*pod{}
	for _, dir := range checkedRoots {
		r, errs := rd.render(s, dir)
		p.errs = append(p.errs, errs...)
		if r == nil {
			continue
		}
		renders = append(renders, r)
		pods, errs := checkRendered(s, r)
		p.errs = append(p.errs, errs...)
		podsOf[dir] = pods
		if r.productOnly {
			p.errs = append(p.errs, checkProductOnly(r, pods)...)
		}
		switch dir {
		case baseDir, transportsDir:
			n := 0
			for _, pd := range pods {
				if pd.envoy != nil {
					n++
				}
			}
			if n != 1 {
				p.addf("%s: want one Deployment with the Envoy sidecar, found %d", dir, n)
			}
		case kindDir:
			p.errs = append(p.errs, checkKind(s, r)...)
		case istioDir:
			if len(r.envoyFilters) != 1 {
				p.addf("%s: want one EnvoyFilter, found %d", dir, len(r.envoyFilters))
			}
		case gatewayRedisDir:
			if len(r.envoyFilters) != 1 {
				p.addf("%s: want one EnvoyFilter, found %d", dir, len(r.envoyFilters))
			}
			p.errs = append(p.errs, checkGatewayRedis(r, pods)...)
		}
	}
	p.errs = append(p.errs, checkMonitoringRoots(s, rd, podsOf)...)
	p.errs = append(p.errs, checkDockerfile(s)...)
	p.errs = append(p.errs, checkBuildCommand(s)...)
	p.errs = append(p.errs, checkImagePorts(s, renders)...)
	return p.errs
}

// The monitoring folders, and the render whose Pods each one scrapes.
const (
	observabilityDir = "manifests/observability"
	sidecarMonDir    = "manifests/observability/sidecar"
	gatewayMonDir    = "manifests/observability/gateway"
)

// checkMonitoringRoots renders manifests/observability, then checks each
// of its PodMonitors against the Pods of the deployment it is for (the
// examples, here through the plugin-transports root that builds on them and
// shares their namespace; the Istio variant), which checkAll already
// rendered and checked.
func checkMonitoringRoots(s snapshot, rd *renderer, podsOf map[string][]*pod) []error {
	var p problems
	_, errs := rd.render(s, observabilityDir)
	p.errs = append(p.errs, errs...)
	for dir, target := range map[string]string{sidecarMonDir: transportsDir, gatewayMonDir: istioDir} {
		r, errs := rd.render(s, dir)
		p.errs = append(p.errs, errs...)
		if r == nil {
			continue
		}
		if len(r.podMonitors) == 0 {
			p.addf("%s: no PodMonitor", dir)
		}
		checkMonitors(&rendered{dir: dir + " on " + target, podMonitors: r.podMonitors}, podsOf[target], &p)
	}
	return p.errs
}

// checkProductOnly checks a render of the product alone: no example image
// (the echo server, the example plugin) and no server container in the Pod
// with Envoy (the user adds theirs).
func checkProductOnly(r *rendered, pods []*pod) []error {
	var p problems
	for _, pd := range pods {
		for _, c := range containers(pd.spec) {
			if b := imageBase(c.Image); b == imageEcho || b == imagePlugin {
				p.addf("%s: container %s runs the example image %s: the product holds no examples (move it to an overlay)", pd.where, c.Name, c.Image)
			}
		}
		if pd.envoy != nil && len(pd.servers) > 0 {
			p.addf("%s: has a server container (%s): the product leaves the MCP server to the user's overlay", pd.where, pd.servers[0].Name)
		}
	}
	return p.errs
}

// TestDeployment runs every check on the repository's files.
func TestDeployment(t *testing.T) {
	for _, err := range checkAll(loadSnapshot(t), newRenderer()) {
		t.Error(err)
	}
}

// TestEnvoyBootstrap checks envoy/envoy.yaml on its own against the shipped
// plugin configuration, and that it says what the processor needs.
func TestEnvoyBootstrap(t *testing.T) {
	s := loadSnapshot(t)
	cfg, err := config.Parse(s.file("manifests/config/config.yaml"), nil)
	if err != nil {
		t.Fatalf("manifests/config/config.yaml: %v", err)
	}
	facts, errs := checkBootstrap(s.file("envoy/envoy.yaml"), limitsOf(cfg))
	for _, err := range errs {
		t.Error(err)
	}
	// The ports the binaries listen on by default (cmd/extproc --grpc-addr,
	// the Envoy listener the Service targets, cmd/mcp-echo on loopback).
	if facts.extproc.String() != "127.0.0.1:50052" {
		t.Errorf("ext_proc cluster endpoint = %s, want 127.0.0.1:50052", facts.extproc)
	}
	if facts.mcpPort != 8080 {
		t.Errorf("MCP listener port = %d, want 8080", facts.mcpPort)
	}
	if len(facts.upstreams) != 1 || facts.upstreams[0].String() != "127.0.0.1:3000" {
		t.Errorf("upstreams = %v, want [127.0.0.1:3000]", facts.upstreams)
	}
}

// TestEveryKustomizationRenders builds every other kustomization folder of
// the repository (checkedRoots are built by TestDeployment; components only
// build inside another), so a folder no other check names cannot rot.
func TestEveryKustomizationRenders(t *testing.T) {
	s := loadSnapshot(t)
	rd := newRenderer()
	n := 0
	for name, data := range s.files {
		dir, ok := strings.CutSuffix(name, "/kustomization.yaml")
		if !ok || strings.Contains(string(data), "kind: Component") || slices.Contains(checkedRoots, dir) {
			continue
		}
		n++
		if _, errs := rd.render(s, dir); len(errs) > 0 {
			t.Errorf("%s: %v", dir, errors.Join(errs...))
		}
	}
	if n < 8 {
		t.Errorf("only %d kustomizations found", n)
	}
}
