package main

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundskeeper-io/groundskeeper/examples/backup-entry/api"
)

// The deletion decision is a pure function of the entry and the time.
func TestKeepPrefix(t *testing.T) {
	deleted := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	c := &controller{grace: 72 * time.Hour}
	for _, tc := range []struct {
		name     string
		now      time.Time
		prefix   string
		force    string
		grace    time.Duration
		wantKeep bool
	}{
		{"deleted 1h ago, 72h grace period: kept", deleted.Add(time.Hour), "p/", "", 72 * time.Hour, true},
		{"deleted 72h ago, 72h grace period: deleted", deleted.Add(72 * time.Hour), "p/", "", 72 * time.Hour, false},
		{"1ns before the grace period ends: kept", deleted.Add(72*time.Hour - 1), "p/", "", 72 * time.Hour, true},
		{"force annotation: deleted at once", deleted, "p/", "true", 72 * time.Hour, false},
		{"force annotation other than \"true\": kept", deleted, "p/", "yes", 72 * time.Hour, true},
		{"never admitted: nothing to keep", deleted, "", "", 72 * time.Hour, false},
		{"grace period 0: deleted at once", deleted, "p/", "", 0, false},
		{"deletion timestamp in the future (clock skew): kept", deleted.Add(-time.Hour), "p/", "", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.grace = tc.grace
			e := &api.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: "shoot--dev--a--1", DeletionTimestamp: &metav1.Time{Time: deleted}}}
			e.Status.Prefix = tc.prefix
			if tc.force != "" {
				e.Annotations = map[string]string{api.ForceDeletionAnnotation: tc.force}
			}
			keep, at, err := c.keepPrefix(e, tc.now)
			if err != nil {
				t.Fatal(err)
			}
			if keep != tc.wantKeep {
				t.Fatalf("keep = %t, want %t", keep, tc.wantKeep)
			}
			if keep && !at.Equal(deleted.Add(tc.grace)) {
				t.Errorf("deletable at %s, want %s", at, deleted.Add(tc.grace))
			}
		})
	}
}

func TestFlagErrorsNameTheFlag(t *testing.T) {
	for _, args := range [][]string{
		{"--deletion-grace-period", "-1d"},
		{"--deletion-grace-period", "30"},
		{"--kubeconfig", "/nonexistent/kubeconfig"},
	} {
		err := run(args)
		if err == nil {
			t.Errorf("run(%q): no error", args)
			continue
		}
		if flag := strings.TrimPrefix(args[0], "--"); !strings.Contains(err.Error(), flag) {
			t.Errorf("run(%q): %v; want the flag %s named", args, err, flag)
		}
	}
}
