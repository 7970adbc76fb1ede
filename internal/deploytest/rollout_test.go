package deploytest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kustomize/api/hasher"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

// checksumAnnotation is the Pod template annotation that carries the digest
// of the ConfigMap behind volume name (the helm chart writes it).
func checksumAnnotation(volume string) string { return "checksum/" + volume }

// configDigest is the digest a checksum annotation must hold: the SHA-256
// (hex) of the ConfigMap's one data value.
func configDigest(cm *corev1.ConfigMap) (string, error) {
	if len(cm.Data) != 1 || len(cm.BinaryData) != 0 {
		return "", fmt.Errorf("ConfigMap %s has %d keys; a checksum covers one", cm.Name, len(cm.Data)+len(cm.BinaryData))
	}
	for _, v := range cm.Data {
		sum := sha256.Sum256([]byte(v))
		return hex.EncodeToString(sum[:]), nil
	}
	return "", nil
}

// hasContentHashName reports whether a ConfigMap's name ends in the content
// hash kustomize's generator appends (so a change gives a new name and
// rolls the Pods that mount it).
func hasContentHashName(cm *corev1.ConfigMap) bool {
	i := strings.LastIndex(cm.Name, "-")
	if i < 0 {
		return false
	}
	unsuffixed := cm.DeepCopy()
	unsuffixed.Name = cm.Name[:i]
	unsuffixed.Namespace, unsuffixed.Labels, unsuffixed.Annotations = "", nil, nil
	unsuffixed.APIVersion, unsuffixed.Kind = "v1", "ConfigMap"
	js, err := json.Marshal(unsuffixed)
	if err != nil {
		return false
	}
	node, err := kyaml.Parse(string(js))
	if err != nil {
		return false
	}
	h, err := (&hasher.Hasher{}).Hash(node)
	return err == nil && h == cm.Name[i+1:]
}

// checkConfigRollout checks that a change of any ConfigMap a Pod mounts
// reaches the Pod: the Pod template carries its digest (checksum/<volume>),
// or its name carries kustomize's content hash, or (unless strict) it is
// extproc's own --config directory, which extproc reloads live. A checksum
// annotation that does not match the ConfigMap is always an error: the Pods
// would not roll, or roll for nothing.
func checkConfigRollout(r *rendered, pd *pod, strict bool, p *problems) {
	ann := pd.d.Spec.Template.Annotations
	for _, v := range pd.spec.Volumes {
		if v.ConfigMap == nil {
			continue
		}
		cm := findConfigMap(r, pd.d.Namespace, v.ConfigMap.Name)
		if cm == nil {
			continue // reported by checkPod
		}
		got, annotated := ann[checksumAnnotation(v.Name)]
		want, err := configDigest(cm)
		switch {
		case annotated && err != nil:
			p.addf("%s: %v", pd.where, err)
		case annotated && got != want:
			p.addf("%s: annotation %s is %s, but ConfigMap %s hashes to %s: a config change would not roll the Pods",
				pd.where, checksumAnnotation(v.Name), got, cm.Name, want)
		case annotated:
		case hasContentHashName(cm):
		case !strict && pd.extproc != nil && mountsConfig(pd.extproc.c, v.Name):
			// Reloaded live by extproc (no subPath, checked elsewhere).
		default:
			p.addf("%s: volume %s (ConfigMap %s): no %s annotation and no content hash in the name: a change would not roll the Pods",
				pd.where, v.Name, cm.Name, checksumAnnotation(v.Name))
		}
	}
}

// mountsConfig reports whether c mounts volume as the directory of its
// --config file.
func mountsConfig(c *corev1.Container, volume string) bool {
	cfg, ok := flagValue(c.Args, "config")
	if !ok {
		return false
	}
	for _, m := range c.VolumeMounts {
		if m.Name == volume && strings.HasPrefix(cfg, strings.TrimSuffix(m.MountPath, "/")+"/") {
			return true
		}
	}
	return false
}
