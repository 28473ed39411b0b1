package lifecycle

import (
	"errors"
	"testing"
	"time"

	"github.com/groundskeeper-io/groundskeeper/retention"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func claimWith(ann map[string]string, refs ...metav1.OwnerReference) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-db-1", Namespace: "ns", Annotations: ann, OwnerReferences: refs}}
}

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func TestAnnotationKeys(t *testing.T) {
	var def Annotations
	if got := def.LastUnmountedKey(); got != "groundskeeper.io/last-unmounted-on" {
		t.Errorf("default key %q", got)
	}
	as := Annotations{Prefix: AerospikeAnnotationPrefix}
	for got, want := range map[string]string{
		as.TTLKey():           "aerospike.travelaudience.com/pvc-ttl",
		as.PodNameKey():       "aerospike.travelaudience.com/pod-name",
		as.LastUnmountedKey(): "aerospike.travelaudience.com/last-unmounted-on",
	} {
		if got != want {
			t.Errorf("key %q, want %q", got, want)
		}
	}
}

func TestMarkUnmountedAndMounted(t *testing.T) {
	a := Annotations{}
	c := claimWith(a.Track("db-1", 30*retention.Day))
	ch := a.MarkUnmounted(c, "db-1", t0.Add(1500*time.Millisecond))
	if v := ch[a.LastUnmountedKey()]; v == nil || *v != "2026-11-22T12:00:01Z" || len(ch) != 1 {
		t.Fatalf("MarkUnmounted = %v", ch)
	}
	c.Annotations[a.LastUnmountedKey()] = *ch[a.LastUnmountedKey()]
	if again := a.MarkUnmounted(c, "db-1", t0.Add(time.Hour)); again != nil {
		t.Errorf("marking twice moves the instant: %v", again)
	}
	m := a.MarkMounted(c, "db-1")
	if v, ok := m[a.LastUnmountedKey()]; !ok || v != nil || len(m) != 1 {
		t.Errorf("MarkMounted = %v, want removal of last-unmounted-on", m)
	}
	delete(c.Annotations, a.LastUnmountedKey())
	if m := a.MarkMounted(c, "db-1"); m != nil {
		t.Errorf("MarkMounted on a mounted claim = %v", m)
	}
	if m := a.MarkMounted(c, "db-7"); m == nil || *m[a.PodNameKey()] != "db-7" {
		t.Errorf("MarkMounted by another pod = %v", m)
	}
}

func TestReuse(t *testing.T) {
	a := Annotations{}
	unmounted := func(since time.Time, ttl string) map[string]string {
		m := map[string]string{a.PodNameKey(): "db-1", a.LastUnmountedKey(): since.Format(time.RFC3339)}
		if ttl != "" {
			m[a.TTLKey()] = ttl
		}
		return m
	}
	terminating := claimWith(nil)
	terminating.DeletionTimestamp = &metav1.Time{Time: t0}
	earlierPod := ctl(Ref{APIVersion: "v1", Kind: "Pod", Name: "db-1", UID: "old"})
	otherPod := ctl(Ref{APIVersion: "v1", Kind: "Pod", Name: "db-0", UID: "x"})
	cases := []struct {
		desc  string
		claim *corev1.PersistentVolumeClaim
		def   time.Duration
		want  Verdict
	}{
		{"no claim: create", nil, 0, VerdictCreate},
		{"fresh claim: reuse", claimWith(nil), 0, VerdictReuse},
		{"claim being deleted: wait", terminating, 0, VerdictWait},
		{"claim still owned by an earlier pod of the same name: wait", claimWith(nil, earlierPod), 0, VerdictWait},
		{"claim owned by the owner only: reuse", claimWith(nil, ctl(owner)), 0, VerdictReuse},
		{"controller reference to another pod is not ours to judge: reuse", claimWith(nil, otherPod), 0, VerdictReuse},
		{"unmounted 29d ago, 30d TTL: reuse", claimWith(unmounted(t0.Add(-29*retention.Day), "30d")), 0, VerdictReuse},
		{"unmounted exactly 30d ago, 30d TTL: delete first", claimWith(unmounted(t0.Add(-30*retention.Day), "30d")), 0, VerdictDeleteFirst},
		{"unmounted 1h ago, TTL 0: delete first", claimWith(unmounted(t0.Add(-time.Hour), "0")), 0, VerdictDeleteFirst},
		{"unmounted 2h ago, no annotation, default 1h: delete first", claimWith(unmounted(t0.Add(-2*time.Hour), "")), time.Hour, VerdictDeleteFirst},
		{"unmounted long ago, no TTL anywhere: reuse", claimWith(unmounted(t0.Add(-400*retention.Day), "")), 0, VerdictReuse},
		{"mounted claim with TTL: reuse", claimWith(map[string]string{a.TTLKey(): "1s"}), 0, VerdictReuse},
	}
	for _, c := range cases {
		d, err := a.Reuse(c.claim, "db-1", "", c.def, t0)
		if err != nil || d.Verdict != c.want {
			t.Errorf("%s: %v (%s), %v; want %v", c.desc, d.Verdict, d.Reason, err, c.want)
		}
		if (d.Verdict == VerdictWait || d.Verdict == VerdictDeleteFirst) && d.Reason == "" {
			t.Errorf("%s: no reason", c.desc)
		}
	}
}

func TestBadAnnotationsAreErrorsNeverExpiry(t *testing.T) {
	a := Annotations{}
	for desc, ann := range map[string]map[string]string{
		"bad time":     {a.LastUnmountedKey(): "yesterday", a.TTLKey(): "1d"},
		"bad ttl":      {a.LastUnmountedKey(): t0.Format(time.RFC3339), a.TTLKey(): "30"},
		"negative ttl": {a.LastUnmountedKey(): t0.Format(time.RFC3339), a.TTLKey(): "-1d"},
	} {
		_, err := a.Reuse(claimWith(ann), "db-1", "", 0, t0.Add(1000*retention.Day))
		if !errors.Is(err, ErrInvalidInput) {
			t.Errorf("%s: err = %v, want ErrInvalidInput", desc, err)
		}
	}
}
