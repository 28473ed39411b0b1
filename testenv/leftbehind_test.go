package testenv

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The sync nudges only the pods KWOK should have acted on more than
// syncLate ago: removed (terminating, no finalizer) or started.
func TestLeftBehind(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(d)} }
	scheduled := func(phase corev1.PodPhase, d time.Duration) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: phase, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: *at(d)}}}}
	}
	terminating := func(d time.Duration, finalizers ...string) *corev1.Pod {
		p := scheduled(corev1.PodRunning, -time.Hour)
		p.DeletionTimestamp, p.Finalizers = at(d), finalizers
		return p
	}
	for _, c := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"terminating, its deletionTimestamp long past", terminating(-syncLate - time.Second), true},
		{"terminating, its deletionTimestamp just past", terminating(-time.Second), false},
		{"terminating, its grace period running", terminating(30 * time.Second), false},
		{"terminating, held by a finalizer", terminating(-time.Hour, "example.com/hold"), false},
		{"scheduled long ago, still Pending", scheduled(corev1.PodPending, -syncLate-time.Second), true},
		{"scheduled just now, Pending", scheduled(corev1.PodPending, -time.Second), false},
		{"Running", scheduled(corev1.PodRunning, -time.Hour), false},
		{"Succeeded", scheduled(corev1.PodSucceeded, -time.Hour), false},
		{"Pending, never scheduled", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}, false},
	} {
		if got := leftBehind(c.pod, now); got != c.want {
			t.Errorf("%s: leftBehind = %v, want %v", c.name, got, c.want)
		}
	}
}
