package opsctl

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/groundskeeper-io/groundskeeper/examples/etcd-opstask/api"
)

// Bad usage is refused before any connection, with the flag and value named;
// without a cluster, a command that needs one says so.
func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string // on stderr
	}{
		{[]string{"remove"}, ExitUsage, `unknown command "remove" for "opstask"`},
		{[]string{"create", "backup"}, ExitUsage, `unknown command "backup" for "opstask create"`},
		{[]string{"tasks", "wait"}, ExitUsage, "opstask tasks wait: accepts 1 arg(s), received 0"},
		{[]string{"tasks", "wait", "snap-1"}, ExitFailed, "no kubeconfig: pass --kubeconfig"}, // nothing in the environment
		{[]string{"tasks", "wait", "snap-1", "--timeout", "1s"}, ExitFailed, "no kubeconfig: pass --kubeconfig"},
		{[]string{"tasks", "wait", "snap-1", "--timeout"}, ExitUsage, "flag needs an argument: --timeout"},
		{[]string{"create", "snapshot", "--etcd", "main", "--type", "incremental"}, ExitFailed, `--type "incremental": want full or delta`},
		{[]string{"create", "snapshot", "--type", "full"}, ExitFailed, "--etcd is required"},
		{[]string{"create", "snapshot", "--etcd", "main"}, ExitFailed, "no kubeconfig: pass --kubeconfig"},
		{[]string{"create", "maintenance", "--etcd", "main"}, ExitFailed, "give --compaction, --defragmentation or both"},
		{[]string{"create", "copy-backups", "--source", "backups", "--target", "GCS:dr"}, ExitFailed, `--source "backups": want PROVIDER:CONTAINER[/PREFIX]`},
		{[]string{"create", "copy-backups", "--source", "S3:b", "--target", "GCS:dr", "--max-backups", "-1"}, ExitFailed, "--max-backups -1"},
		{[]string{"create", "copy-backups", "--etcd", "main"}, ExitUsage, "unknown flag: --etcd"},
		{[]string{"create", "recover-quorum", "--allow-data-loss"}, ExitFailed, "--etcd is required"},
		{[]string{"create", "recover-quorum", "--etcd", "main", "--allow-data-loss", "--skip-approval"}, ExitFailed, "--allow-data-loss with --skip-approval: a recovery that may lose data waits for a person to approve"},
		{[]string{"create", "recover-quorum", "--etcd", "main", "--allow-data-loss=maybe"}, ExitUsage, `invalid argument "maybe" for "--allow-data-loss" flag`},
		{[]string{"tasks", "approve"}, ExitUsage, "opstask tasks approve: accepts 1 arg(s), received 0"},
		{[]string{"tasks", "approve", "a", "b"}, ExitUsage, "opstask tasks approve: accepts 1 arg(s), received 2"},
		{[]string{"tasks", "approve", "recover"}, ExitFailed, "no kubeconfig: pass --kubeconfig"},
	} {
		t.Setenv("KUBECONFIG", "")
		t.Setenv("HOME", t.TempDir())
		t.Setenv("KUBERNETES_SERVICE_HOST", "")
		var out, errOut bytes.Buffer
		code := Run(context.Background(), tc.args, &out, &errOut)
		if code != tc.code || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("opstask %q: exit %d, stderr %q; want exit %d and %q", tc.args, code, errOut.String(), tc.code, tc.want)
		}
		if n := strings.Count(strings.TrimSpace(errOut.String()), "\n"); n != 0 {
			t.Errorf("opstask %q: %d lines on stderr; want one:\n%s", tc.args, n+1, errOut.String())
		}
	}
}

// Without a command, opstask prints its help: create's kinds and the
// plugin's commands, set to the EtcdOpsTask resource.
func TestHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Run(context.Background(), nil, &out, &errOut); code != ExitSucceeded {
		t.Fatalf("opstask: exit %d, stderr %q", code, errOut.String())
	}
	for _, want := range []string{"create", "tasks", "explain", "lock"} {
		if !strings.Contains(out.String(), "\n  "+want+" ") {
			t.Errorf("help lacks the command %s:\n%s", want, out.String())
		}
	}
	out.Reset()
	if code := Run(context.Background(), []string{"tasks", "--help"}, &out, &errOut); code != ExitSucceeded {
		t.Fatalf("opstask tasks --help: exit %d, stderr %q", code, errOut.String())
	}
	if want := `--resource string        the task resource, as kubectl names it (resource.group) (default "etcdopstasks.ops.example.com")`; !strings.Contains(out.String(), "etcdopstasks."+api.Group) {
		t.Errorf("opstask tasks --help: the task resource is not the EtcdOpsTask (%s):\n%s", want, out.String())
	}
}

func TestParseStore(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want api.StoreSpec
	}{
		{"S3:backups", api.StoreSpec{Provider: "S3", Container: "backups", SecretRef: "s"}},
		{"GCS:dr/eu/main/", api.StoreSpec{Provider: "GCS", Container: "dr", Prefix: "eu/main/", SecretRef: "s"}},
		{"Local:/var/backups/main", api.StoreSpec{Provider: "Local", Container: "/var/backups/main", SecretRef: "s"}},
	} {
		got, err := parseStore("--source", tc.in, "s")
		if err != nil || got != tc.want {
			t.Errorf("parseStore(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}
