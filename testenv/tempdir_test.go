package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// The components' data directories go where DataDirEnv says, and a
// directory that cannot be used is an error naming the variable and its
// value.
func TestDataDirEnvPlacesTheComponentsData(t *testing.T) {
	parent := t.TempDir()
	t.Setenv(DataDirEnv, parent)
	dir, err := tempDir("minio")
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(dir) != parent {
		t.Errorf("data directory %s, want one in %s", dir, parent)
	}
	if _, err := os.Stat(filepath.Join(dir, ownerFile)); err != nil {
		t.Errorf("no owner file in %s: %v", dir, err)
	}

	missing := filepath.Join(parent, "missing")
	t.Setenv(DataDirEnv, missing)
	_, err = tempDir("minio")
	if err == nil || !strings.Contains(err.Error(), DataDirEnv) || !strings.Contains(err.Error(), missing) {
		t.Errorf("data directory in a missing folder: %v; want an error naming %s=%q", err, DataDirEnv, missing)
	}
}
