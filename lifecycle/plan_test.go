package lifecycle_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PlanCollect is the whole decision of a collector pass: these cases need
// no API server.
func TestPlanCollect(t *testing.T) {
	var a lifecycle.Annotations
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	claim := func(name string, ann map[string]string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			UID: types.UID(name + "-uid"), ResourceVersion: "7", Annotations: ann}}
	}
	// unmounted is a claim of pod db-N marked unmounted ago before now,
	// with pvc-ttl ttl ("" for none).
	unmounted := func(name string, ago time.Duration, ttl string) *corev1.PersistentVolumeClaim {
		ann := map[string]string{a.PodNameKey(): "db", a.LastUnmountedKey(): now.Add(-ago).Format(time.RFC3339)}
		if ttl != "" {
			ann[a.TTLKey()] = ttl
		}
		return claim(name, ann)
	}
	terminating := unmounted("going", 3*time.Hour, "1h")
	terminating.DeletionTimestamp = &metav1.Time{Time: now}
	pod := func(namespace, name string, claims ...string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
		for _, c := range claims {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: c,
				VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c}}})
		}
		return p
	}
	// deleted is the Deletion of a claim of unmounted, expired after ttl.
	deleted := func(name string, ago, ttl time.Duration) lifecycle.Deletion {
		since := now.Add(-ago)
		return lifecycle.Deletion{Claim: name, UID: types.UID(name + "-uid"), ResourceVersion: "7", Pod: "db",
			UnmountedSince: since, Expired: since.Add(ttl),
			Reason: "claim " + name + " unmounted since " + since.Format(time.RFC3339) + " expired at " + since.Add(ttl).Format(time.RFC3339)}
	}
	mountedBy := func(name, pods string) lifecycle.Skip {
		return lifecycle.Skip{Claim: name, Reason: lifecycle.SkipMounted,
			Detail: "pod " + pods + " mounts it; its groundskeeper.io/last-unmounted-on annotation is out of date"}
	}

	cases := []struct {
		name       string
		claims     []*corev1.PersistentVolumeClaim
		pods       []*corev1.Pod
		defaultTTL time.Duration
		want       lifecycle.CollectPlan
	}{
		{name: "no claims: nothing to do"},
		{
			name:   "claim never unmounted: kept, never expires",
			claims: []*corev1.PersistentVolumeClaim{claim("a", a.Track("db-0", time.Hour))},
		},
		{
			name:   "unmounted 1h ago, pvc-ttl 2h: kept, expires in 1h",
			claims: []*corev1.PersistentVolumeClaim{unmounted("a", time.Hour, "2h")},
			want:   lifecycle.CollectPlan{Next: now.Add(time.Hour), RequeueAfter: time.Hour},
		},
		{
			name:   "unmounted 3h ago, pvc-ttl 2h: deleted",
			claims: []*corev1.PersistentVolumeClaim{unmounted("a", 3*time.Hour, "2h")},
			want:   lifecycle.CollectPlan{Delete: []lifecycle.Deletion{deleted("a", 3*time.Hour, 2*time.Hour)}},
		},
		{
			name:   "unmounted exactly 2h ago, pvc-ttl 2h: deleted (the TTL has run out at now)",
			claims: []*corev1.PersistentVolumeClaim{unmounted("a", 2*time.Hour, "2h")},
			want:   lifecycle.CollectPlan{Delete: []lifecycle.Deletion{deleted("a", 2*time.Hour, 2*time.Hour)}},
		},
		{
			name:   "pvc-ttl 0: deleted as soon as unmounted",
			claims: []*corev1.PersistentVolumeClaim{unmounted("a", 0, "0s")},
			want:   lifecycle.CollectPlan{Delete: []lifecycle.Deletion{deleted("a", 0, 0)}},
		},
		{
			name:   "no pvc-ttl and no default TTL: never expires",
			claims: []*corev1.PersistentVolumeClaim{unmounted("a", 1000*time.Hour, "")},
		},
		{
			name:       "no pvc-ttl, default TTL 1h, unmounted 3h ago: deleted",
			claims:     []*corev1.PersistentVolumeClaim{unmounted("a", 3*time.Hour, "")},
			defaultTTL: time.Hour,
			want:       lifecycle.CollectPlan{Delete: []lifecycle.Deletion{deleted("a", 3*time.Hour, time.Hour)}},
		},
		{
			name:       "pvc-ttl 5h overrides default TTL 1h",
			claims:     []*corev1.PersistentVolumeClaim{unmounted("a", 3*time.Hour, "5h")},
			defaultTTL: time.Hour,
			want:       lifecycle.CollectPlan{Next: now.Add(2 * time.Hour), RequeueAfter: 2 * time.Hour},
		},
		{
			name:   "expired but being deleted: left to its deletion",
			claims: []*corev1.PersistentVolumeClaim{terminating},
		},
		{
			name:   "expired but mounted by a pod of another name: the mark is out of date, not deleted",
			claims: []*corev1.PersistentVolumeClaim{unmounted("a", 3*time.Hour, "2h")},
			pods:   []*corev1.Pod{pod("ns", "other", "a"), pod("ns", "web", "b")},
			want:   lifecycle.CollectPlan{Mounted: []lifecycle.Skip{mountedBy("a", "other")}},
		},
		{
			name:   "marked, not expired, mounted by two pods: the mark is out of date",
			claims: []*corev1.PersistentVolumeClaim{unmounted("a", time.Minute, "2h")},
			pods:   []*corev1.Pod{pod("ns", "p1", "a"), pod("ns", "p2", "x", "a")},
			want:   lifecycle.CollectPlan{Mounted: []lifecycle.Skip{mountedBy("a", "p1, p2")}},
		},
		{
			name:   "marked without any TTL, mounted: the mark is out of date all the same",
			claims: []*corev1.PersistentVolumeClaim{unmounted("a", time.Minute, "")},
			pods:   []*corev1.Pod{pod("ns", "p1", "a")},
			want:   lifecycle.CollectPlan{Mounted: []lifecycle.Skip{mountedBy("a", "p1")}},
		},
		{
			name:   "a pod of another namespace mounting a claim of the same name does not keep it",
			claims: []*corev1.PersistentVolumeClaim{unmounted("a", 3*time.Hour, "2h")},
			pods:   []*corev1.Pod{pod("elsewhere", "db", "a")},
			want:   lifecycle.CollectPlan{Delete: []lifecycle.Deletion{deleted("a", 3*time.Hour, 2*time.Hour)}},
		},
		{
			name: "bad annotations: reported, never deleted",
			claims: []*corev1.PersistentVolumeClaim{
				claim("when", map[string]string{a.LastUnmountedKey(): "yesterday"}),
				claim("ttl", map[string]string{a.LastUnmountedKey(): now.Add(-time.Hour).Format(time.RFC3339), a.TTLKey(): "-1d"}),
			},
			want: lifecycle.CollectPlan{Invalid: []lifecycle.Skip{
				{Claim: "when", Reason: lifecycle.SkipInvalid, Detail: `lifecycle: invalid input: claim ns/when: annotation groundskeeper.io/last-unmounted-on = "yesterday": not an RFC 3339 time`},
				{Claim: "ttl", Reason: lifecycle.SkipInvalid},
			}},
		},
		{
			name: "several TTLs: deletions ordered by TTL, then as given; next is the earliest expiry",
			claims: []*corev1.PersistentVolumeClaim{
				unmounted("long-1", 30*time.Hour, "1d"),
				unmounted("short-1", 2*time.Hour, "1h"),
				unmounted("long-2", 25*time.Hour, "1d"),
				unmounted("short-2", 30*time.Minute, "1h"),
				unmounted("short-3", 90*time.Minute, "1h"),
				unmounted("long-3", 20*time.Hour, "1d"),
			},
			want: lifecycle.CollectPlan{
				Delete: []lifecycle.Deletion{
					deleted("short-1", 2*time.Hour, time.Hour),
					deleted("short-3", 90*time.Minute, time.Hour),
					deleted("long-1", 30*time.Hour, 24*time.Hour),
					deleted("long-2", 25*time.Hour, 24*time.Hour),
				},
				Next: now.Add(30 * time.Minute), RequeueAfter: 30 * time.Minute,
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := a.PlanCollect(tc.claims, tc.pods, tc.defaultTTL, now)
			if err != nil {
				t.Fatal(err)
			}
			// The detail of an invalid pvc-ttl is retention's message;
			// only its claim and reason are the rule under test here.
			for i := range got.Invalid {
				if got.Invalid[i].Claim == "ttl" {
					got.Invalid[i].Detail = ""
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("PlanCollect (-want +got):\n%s", diff)
			}
		})
	}
}

// The plan neither changes the claims and pods it is given nor depends on
// anything but them and now: asked twice, it answers the same.
func TestPlanCollectIsPure(t *testing.T) {
	var a lifecycle.Annotations
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: "u", ResourceVersion: "1",
		Annotations: map[string]string{a.LastUnmountedKey(): now.Add(-2 * time.Hour).Format(time.RFC3339), a.TTLKey(): "1h"}}}
	before := c.DeepCopy()
	p1, err1 := a.PlanCollect([]*corev1.PersistentVolumeClaim{c}, nil, 0, now)
	p2, err2 := a.PlanCollect([]*corev1.PersistentVolumeClaim{c}, nil, 0, now)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if diff := cmp.Diff(p1, p2); diff != "" {
		t.Errorf("two plans differ:\n%s", diff)
	}
	if len(p1.Delete) != 1 {
		t.Errorf("plan = %+v, want the claim deleted", p1)
	}
	if diff := cmp.Diff(before, c); diff != "" {
		t.Errorf("PlanCollect changed the claim:\n%s", diff)
	}
}
