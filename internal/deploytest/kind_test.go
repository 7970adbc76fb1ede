package deploytest

import (
	"regexp"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// kindCluster is the part of kind's v1alpha4 Cluster config the project
// uses; decoding is strict.
type kindCluster struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Name       string `json:"name,omitempty"`
	Nodes      []struct {
		Role              string `json:"role"`
		Image             string `json:"image,omitempty"`
		ExtraPortMappings []struct {
			ContainerPort int32  `json:"containerPort"`
			HostPort      int32  `json:"hostPort"`
			ListenAddress string `json:"listenAddress,omitempty"`
			Protocol      string `json:"protocol,omitempty"`
		} `json:"extraPortMappings,omitempty"`
	} `json:"nodes"`
}

// Files of the kind flow.
const (
	kindClusterFile = "hack/kind/cluster.yaml"
	kindE2EScript   = "hack/kind/e2e.sh"
	deployMk        = "mk/deploy.mk"
)

// makeVar returns the value of `NAME ?= value` or `NAME := value` in a
// makefile.
func makeVar(text, name string) (string, bool) {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\s*[:?]?=\s*(.*?)\s*$`).FindStringSubmatch(text)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// checkKind checks the kind flow against the kind overlay: the cluster maps
// every node port, mk/deploy.mk loads exactly the images the overlay runs
// (never pulled), and the e2e script's names exist.
func checkKind(s snapshot, r *rendered) []error {
	var p problems
	var kc kindCluster
	if err := yaml.UnmarshalStrict(s.file(kindClusterFile), &kc); err != nil {
		p.addf("%s: %v", kindClusterFile, err)
	}
	if kc.Kind != "Cluster" || kc.APIVersion != "kind.x-k8s.io/v1alpha4" {
		p.addf("%s: want kind Cluster, apiVersion kind.x-k8s.io/v1alpha4", kindClusterFile)
	}
	mapped := map[int32]bool{}
	for _, n := range kc.Nodes {
		for _, m := range n.ExtraPortMappings {
			mapped[m.ContainerPort] = true
			if m.ListenAddress != "127.0.0.1" {
				p.addf("%s: port %d is published on %q: keep it on 127.0.0.1", kindClusterFile, m.HostPort, m.ListenAddress)
			}
		}
	}
	for _, svc := range r.services {
		for _, sp := range svc.Spec.Ports {
			if sp.NodePort != 0 && !mapped[sp.NodePort] {
				p.addf("%s: Service %s node port %d is not in the extraPortMappings of %s", r.dir, svc.Name, sp.NodePort, kindClusterFile)
			}
		}
	}

	mk := string(s.file(deployMk))
	if mk == "" {
		p.addf("%s is missing", deployMk)
		return p.errs
	}
	for _, target := range []string{"image", "kind-up", "kind-load", "kind-deploy", "kind-e2e", "kind-down"} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(target) + `:`).MatchString(mk) {
			p.addf("%s: no target %s", deployMk, target)
		}
	}
	for _, ref := range []string{kindDir, kindClusterFile, kindE2EScript} {
		if !strings.Contains(mk, ref) {
			p.addf("%s: does not use %s", deployMk, ref)
		}
	}
	targets, _ := makeVar(mk, "DEPLOY_TARGETS")
	var loaded []string
	for _, t := range strings.Fields(targets) {
		img, ok := makeVar(mk, "DEPLOY_IMAGE_"+t)
		if !ok {
			p.addf("%s: no DEPLOY_IMAGE_%s", deployMk, t)
			continue
		}
		if _, ok := dockerTargets[t]; !ok {
			p.addf("%s: %s is not a Dockerfile target", deployMk, t)
		}
		loaded = append(loaded, img)
	}
	if len(loaded) != len(dockerTargets) {
		p.addf("%s: DEPLOY_TARGETS %q, want every Dockerfile target", deployMk, targets)
	}
	ns, _ := makeVar(mk, "KIND_NAMESPACE")
	for _, d := range r.deployments {
		if d.Namespace != ns {
			p.addf("%s: Deployment %s is in namespace %q, %s uses %q", r.dir, d.Name, d.Namespace, deployMk, ns)
		}
		for _, c := range containers(&d.Spec.Template.Spec) {
			if imageName(c.Image) == imageEnvoy {
				continue
			}
			if !slices.Contains(loaded, imageName(c.Image)) || imageTag(c.Image) != "dev" {
				p.addf("%s: Deployment %s runs %s, which %s does not build and load as :dev", r.dir, d.Name, c.Image, deployMk)
			}
			if c.ImagePullPolicy != corev1.PullNever && c.ImagePullPolicy != corev1.PullIfNotPresent {
				p.addf("%s: Deployment %s: %s must not be pulled (imagePullPolicy Never)", r.dir, d.Name, c.Image)
			}
		}
	}

	script := string(s.file(kindE2EScript))
	if script == "" {
		p.addf("%s is missing", kindE2EScript)
		return p.errs
	}
	if m := regexp.MustCompile(`NAMESPACE=\$\{NAMESPACE:-([^}]+)\}`).FindStringSubmatch(script); m == nil || m[1] != ns {
		p.addf("%s: its default namespace differs from KIND_NAMESPACE %q", kindE2EScript, ns)
	}
	pf := regexp.MustCompile(`port-forward svc/(\S+) :(\d+)`).FindAllStringSubmatch(script, -1)
	if len(pf) == 0 {
		p.addf("%s: no `port-forward svc/NAME :PORT`", kindE2EScript)
	}
	for _, m := range pf {
		port, _ := strconv.Atoi(m[2])
		if !slices.ContainsFunc(r.services, func(svc *corev1.Service) bool {
			return svc.Name == m[1] && slices.ContainsFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool { return int(sp.Port) == port })
		}) {
			p.addf("%s: port-forwards svc/%s :%d, which the kind overlay does not have", kindE2EScript, m[1], port)
		}
	}
	for _, m := range regexp.MustCompile(`deployment/([a-z0-9-]+)`).FindAllStringSubmatch(script+mk, -1) {
		if !slices.ContainsFunc(r.deployments, func(d *appsv1.Deployment) bool { return d.Name == m[1] }) {
			p.addf("%s or %s: deployment/%s does not exist in the kind overlay", kindE2EScript, deployMk, m[1])
		}
	}
	return p.errs
}

// checkImagePorts checks that every container running a project image only
// declares ports its Dockerfile target EXPOSEs.
func checkImagePorts(s snapshot, renders []*rendered) []error {
	var p problems
	mk := string(s.file(deployMk))
	for target, exposed := range dockerTargets {
		img, ok := makeVar(mk, "DEPLOY_IMAGE_"+target)
		if !ok {
			continue // reported by checkKind
		}
		for _, r := range renders {
			for _, d := range r.deployments {
				for _, c := range containers(&d.Spec.Template.Spec) {
					if imageName(c.Image) != img {
						continue
					}
					for _, cp := range c.Ports {
						if !slices.Contains(exposed, int(cp.ContainerPort)) {
							p.addf("%s: Deployment %s container %s: port %d is not EXPOSEd by Dockerfile target %s",
								r.dir, d.Name, c.Name, cp.ContainerPort, target)
						}
					}
				}
			}
		}
	}
	return p.errs
}
