package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// A test binary removes the directories of test binaries that are no longer
// running, and only those.
func TestSweepStaleRemovesOnlyDirectoriesOfDeadBinaries(t *testing.T) {
	parent := t.TempDir()
	mine, ok := processID(os.Getpid())
	if !ok {
		t.Fatal("processID of this process: not alive")
	}
	child := exec.Command("sleep", "60")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	dead, ok := processID(child.Process.Pid)
	if !ok {
		t.Fatal("processID of a running child: not alive")
	}
	child.Process.Kill()
	child.Wait()

	dirs := map[string]struct {
		owner string // "" for no owner file
		kept  bool
	}{
		"groundskeeper-minio-mine":   {owner: mine, kept: true},
		"groundskeeper-minio-dead":   {owner: dead},
		"groundskeeper-etcd-reused":  {owner: fmt.Sprintf("%d 1", os.Getpid())}, // this PID, another start time
		"groundskeeper-kube-unowned": {kept: true},
		"other-dead":                 {owner: dead, kept: true},
	}
	for name, d := range dirs {
		dir := filepath.Join(parent, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "data"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if d.owner != "" {
			if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(d.owner), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	sweepStale(parent)
	for name, d := range dirs {
		_, err := os.Stat(filepath.Join(parent, name, "data"))
		if kept := err == nil; kept != d.kept {
			t.Errorf("%s (owner %q): kept %t, want %t", name, d.owner, kept, d.kept)
		}
	}
}
