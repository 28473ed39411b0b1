package chaos

import (
	"testing"
	"time"
)

func TestMountLogCovering(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	var l MountLog
	l.Mounted("inspect-0", "data-0", true, at(10)) // deleted at 20
	l.Unmounting("inspect-0", at(20))
	l.Mounted("pod-0", "data-0", false, at(30)) // still there
	l.Mounted("inspect-1", "data-1", true, at(10))
	l.Unmounting("inspect-1", at(12))
	// On a node: deleted at 20, still terminating (a list sent at 35
	// found it).
	l.mounts = append(l.mounts, &Mount{Pod: "db-0", Claim: "data-3", UID: "u1", From: at(10), To: at(20), Seen: at(35)})
	for _, tc := range []struct {
		name    string
		claim   string
		lo, hi  float64
		race    time.Duration
		wantPod string
	}{
		{"deleted while a foreign pod mounts it", "data-0", 15, 15.5, 0, "inspect-0"},
		{"deleted before the pod was created", "data-0", 5, 6, 0, ""},
		{"deleted after the pod's delete was sent", "data-0", 21, 22, 0, ""},
		{"deletion may have come after the pod's delete was sent", "data-0", 19, 20.5, 0, ""},
		{"deletion may have come before the pod existed", "data-0", 9.5, 11, 0, ""},
		{"deleted while a pod that is still there mounts it", "data-0", 40, 41, 0, "pod-0"},
		{"within the race window after the pod was created", "data-0", 12, 12.5, 3 * time.Second, ""},
		{"past the race window", "data-0", 13, 13.5, 3 * time.Second, "inspect-0"},
		{"another claim's mount", "data-2", 15, 15.5, 0, ""},
		{"no lower bound", "data-0", -1, 15, 0, ""},
		{"deleted while a deleted pod still terminates", "data-3", 30, 31, 0, "db-0"},
		{"deleted after the terminating pod was last seen", "data-3", 34, 36, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lo := at(tc.lo)
			if tc.lo < 0 {
				lo = time.Time{}
			}
			m, ok := l.Covering(tc.claim, lo, at(tc.hi), tc.race)
			if ok != (tc.wantPod != "") || m.Pod != tc.wantPod {
				t.Errorf("Covering(%s, %s, %s, %s) = %v, %v; want pod %q", tc.claim, lo, at(tc.hi), tc.race, m, ok, tc.wantPod)
			}
		})
	}
	if got := len(l.Mounts()); got != 4 {
		t.Errorf("Mounts() has %d mounts, want 4", got)
	}
}
