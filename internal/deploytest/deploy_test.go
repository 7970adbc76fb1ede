package deploytest

import (
	"testing"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
)

// checkAll runs every check on a snapshot and returns every problem.
func checkAll(s snapshot, rd *renderer) []error {
	var p problems
	var renders []*rendered
	for _, dir := range []string{baseDir, kindDir, istioDir, transportsDir, gatewayRedisDir} {
		r, errs := rd.render(s, dir)
		p.errs = append(p.errs, errs...)
		if r == nil {
			continue
		}
		renders = append(renders, r)
		pods, errs := checkRendered(s, r)
		p.errs = append(p.errs, errs...)
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
	p.errs = append(p.errs, checkDockerfile(s)...)
	p.errs = append(p.errs, checkBuildCommand(s)...)
	p.errs = append(p.errs, checkImagePorts(s, renders)...)
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
