package lifecycle

import (
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClaimName is the name of the claim made from the claim template named
// template for pod ordinal of owner, as the StatefulSet controller names
// it: <template>-<owner>-<ordinal>.
func ClaimName(template, owner string, ordinal int) string {
	return fmt.Sprintf("%s-%s-%d", template, owner, ordinal)
}

// UseTemplates sets s.Pod and s.Claims from templates, as a StatefulSet
// builds its pods from its pod template and volumeClaimTemplates, for an
// owner whose spec has the same two fields:
//
//   - pod ordinal has pod's labels, annotations and spec;
//   - each claim template t gives the claim ClaimName(t.Name, owner,
//     ordinal), with t's labels, annotations and spec;
//   - the pod mounts that claim through a volume named t.Name, which
//     replaces a volume of that name in the pod template (its containers'
//     volumeMounts refer to it by that name).
//
// The templates are deep-copied now: later changes to them do not reach
// the set. Call it after s.Owner.Ref is set (crt/claims.Sets.For sets it).
func (s *ClaimSet) UseTemplates(pod corev1.PodTemplateSpec, claims []corev1.PersistentVolumeClaim) {
	owner, pod := s.Owner.Ref.Name, *pod.DeepCopy()
	templates := make([]corev1.PersistentVolumeClaim, len(claims))
	for i := range claims {
		claims[i].DeepCopyInto(&templates[i])
	}
	s.Claims = func(ordinal int) ([]*corev1.PersistentVolumeClaim, error) {
		out := make([]*corev1.PersistentVolumeClaim, 0, len(templates))
		for _, t := range templates {
			out = append(out, &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: ClaimName(t.Name, owner, ordinal),
					Labels: maps.Clone(t.Labels), Annotations: maps.Clone(t.Annotations)},
				Spec: *t.Spec.DeepCopy(),
			})
		}
		return out, nil
	}
	s.Pod = func(ordinal int) (*corev1.Pod, error) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(pod.Labels), Annotations: maps.Clone(pod.Annotations)},
			Spec: *pod.Spec.DeepCopy()}
		for _, t := range templates {
			v := corev1.Volume{Name: t.Name, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: ClaimName(t.Name, owner, ordinal)}}}
			replaced := false
			for i := range p.Spec.Volumes {
				if p.Spec.Volumes[i].Name == t.Name {
					p.Spec.Volumes[i], replaced = v, true
				}
			}
			if !replaced {
				p.Spec.Volumes = append(p.Spec.Volumes, v)
			}
		}
		return p, nil
	}
}
