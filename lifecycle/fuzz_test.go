package lifecycle

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Annotations come from users and other controllers: whatever they hold,
// reading them never panics, an unparsable value is an error (never an
// expiry), and an expired claim is never reused.
func FuzzAnnotations(f *testing.F) {
	f.Add("2026-11-22T12:00:00Z", "30d", "db-1", int64(0))
	f.Add("2026-11-22T12:00:00+02:00", "0", "", int64(3600))
	f.Add("yesterday", "30", "db-1", int64(-1))
	f.Add("", "1h30m", "x", int64(1<<40))
	f.Fuzz(func(t *testing.T, since, ttl, pod string, nowOffset int64) {
		a := Annotations{}
		claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Annotations: map[string]string{
			a.LastUnmountedKey(): since, a.TTLKey(): ttl, a.PodNameKey(): pod}}}
		now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC).Add(time.Duration(nowOffset))
		u, err := a.Read(claim)
		dec, rerr := a.Reuse(claim, pod, "", 0, now)
		if (err == nil) != (rerr == nil) {
			t.Fatalf("Read error %v but Reuse error %v", err, rerr)
		}
		if err != nil {
			return
		}
		exp := u.Expiry(0)
		if !exp.IsZero() && exp.Before(u.Since) {
			t.Fatalf("expiry %s before unmount %s", exp, u.Since)
		}
		expired := !exp.IsZero() && !now.Before(exp)
		if expired && dec.Verdict == VerdictReuse {
			t.Fatalf("expired claim (since %s, ttl %s, now %s) reused", since, ttl, now)
		}
		if !expired && dec.Verdict != VerdictReuse {
			t.Fatalf("claim not expired but %v: %s", dec.Verdict, dec.Reason)
		}
	})
}

// Every string either parses to a name that round-trips, or is rejected
// with a PolicyError naming it.
func FuzzParseName(f *testing.F) {
	for _, s := range []string{"Retain", "DeleteOnStatefulSetDeletionOnly", "DeleteOnScaledownOnly", "x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseName(s)
		if err != nil {
			pe, ok := err.(*PolicyError)
			if !ok || pe.Value != s || pe.Field != "policy" {
				t.Fatalf("ParseName(%q) error %v", s, err)
			}
			return
		}
		p, err := n.Policy()
		if err != nil {
			t.Fatal(err)
		}
		back, err := p.Name()
		if err != nil || back != n {
			t.Fatalf("%q -> %q -> %+v -> %q (%v)", s, n, p, back, err)
		}
	})
}
