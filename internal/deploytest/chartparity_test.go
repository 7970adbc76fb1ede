package deploytest

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// productOf is what must agree between two renders of the product: the
// Deployment's rollout and Pod spec, the Service's ports, and the content
// of every ConfigMap the Pod mounts, keyed by volume name. Names, labels and
// annotations (helm's release naming, checksums) are left out, and so is
// the chart's topology spread (a ScheduleAnyway preference).
type productOf struct {
	Replicas     *int32
	Strategy     appsv1.DeploymentStrategy
	Pod          corev1.PodSpec
	ServicePorts []corev1.ServicePort
	ServiceType  corev1.ServiceType
	Mounted      map[string]map[string]string
}

// product extracts productOf from a render holding one Deployment and one
// Service.
func product(t *testing.T, r *rendered) productOf {
	t.Helper()
	if len(r.deployments) != 1 || len(r.services) != 1 {
		t.Fatalf("%s: %d Deployments and %d Services, want one of each", r.dir, len(r.deployments), len(r.services))
	}
	d, svc := r.deployments[0], r.services[0]
	p := productOf{Replicas: d.Spec.Replicas, Strategy: d.Spec.Strategy, Pod: *d.Spec.Template.Spec.DeepCopy(),
		ServicePorts: svc.Spec.Ports, ServiceType: svc.Spec.Type, Mounted: map[string]map[string]string{}}
	if p.ServiceType == "" {
		p.ServiceType = corev1.ServiceTypeClusterIP
	}
	p.Pod.TopologySpreadConstraints = nil
	for i := range p.Pod.Volumes {
		v := &p.Pod.Volumes[i]
		if v.ConfigMap == nil {
			continue
		}
		if cm := findConfigMap(r, d.Namespace, v.ConfigMap.Name); cm != nil {
			p.Mounted[v.Name] = cm.Data
		}
		v.ConfigMap.Name = ""
	}
	return p
}

// testChartDefaultsMatchBase renders the chart with its default values and
// manifests/base, and wants the same product: the same containers, args,
// ports, probes, resources, security context, volumes and mounted files.
func testChartDefaultsMatchBase(t *testing.T, bin string, s snapshot) {
	base, errs := render(s, baseDir)
	for _, err := range errs {
		t.Fatal(err)
	}
	chart := renderChart(t, bin, helmShapes[0])
	sameQuantity := cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })
	if diff := cmp.Diff(product(t, base), product(t, chart), sameQuantity); diff != "" {
		t.Errorf("the chart's defaults differ from %s (-base +chart):\n%s", baseDir, diff)
	}
}

// TestChartFilesInSync checks the chart's copies of files it cannot read
// from outside its directory: the alerts and the dashboard. (Its copy of
// envoy/envoy.yaml is checked on every sidecar render.)
func TestChartFilesInSync(t *testing.T) {
	root := repoRoot(t)
	for copy, orig := range map[string]string{
		chartDir + "/files/prometheusrule.yaml":    "manifests/alerts/prometheusrule.yaml",
		chartDir + "/files/grafana-dashboard.json": dashboardFile,
		chartDir + "/files/envoy.yaml":             "envoy/envoy.yaml",
	} {
		a, errA := readRepoFile(root, orig)
		b, errB := readRepoFile(root, copy)
		if errA != nil || errB != nil {
			t.Errorf("%v %v", errA, errB)
			continue
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs from %s: run `make chart-files`", copy, orig)
		}
	}
}
