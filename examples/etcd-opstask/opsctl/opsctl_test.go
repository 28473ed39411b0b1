package opsctl

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/groundskeeper-io/groundskeeper/examples/etcd-opstask/api"
)

// Bad usage is refused before any connection, with the flag and value named.
func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{nil, ExitUsage, "usage: opstask"},
		{[]string{"remove"}, ExitUsage, "usage: opstask"},
		{[]string{"create", "backup"}, ExitUsage, "usage: opstask"},
		{[]string{"wait"}, ExitUsage, "usage: opstask"},
		{[]string{"wait", "snap-1"}, ExitFailed, "no cluster"},                    // nothing in the environment
		{[]string{"wait", "snap-1", "--timeout", "1s"}, ExitFailed, "no cluster"}, // flags after the name
		{[]string{"wait", "snap-1", "--timeout"}, ExitFailed, "flag needs an argument: -timeout"},
		{[]string{"create", "snapshot", "--etcd", "main", "--type", "incremental"}, ExitFailed, `--type "incremental": want full or delta`},
		{[]string{"create", "snapshot", "--type", "full"}, ExitFailed, "--etcd is required"},
		{[]string{"create", "maintenance", "--etcd", "main"}, ExitFailed, "give --compaction, --defragmentation or both"},
		{[]string{"create", "copy-backups", "--source", "backups", "--target", "GCS:dr"}, ExitFailed, `--source "backups": want PROVIDER:CONTAINER[/PREFIX]`},
		{[]string{"create", "copy-backups", "--source", "S3:b", "--target", "GCS:dr", "--max-backups", "-1"}, ExitFailed, "--max-backups -1"},
		{[]string{"create", "recover-quorum", "--allow-data-loss"}, ExitFailed, "--etcd is required"},
		{[]string{"create", "recover-quorum", "--etcd", "main", "--allow-data-loss", "--skip-approval"}, ExitFailed, "--allow-data-loss with --skip-approval: a recovery that may lose data waits for a person to approve"},
		{[]string{"create", "recover-quorum", "--etcd", "main", "--allow-data-loss=maybe"}, ExitFailed, `invalid boolean value "maybe" for -allow-data-loss`},
		{[]string{"approve"}, ExitUsage, "usage: opstask"},
		{[]string{"approve", "a", "b"}, ExitUsage, "usage: opstask"},
		{[]string{"approve", "recover"}, ExitFailed, "no cluster"},
	} {
		t.Setenv("KUBECONFIG", "")
		t.Setenv("HOME", t.TempDir())
		var out, errOut bytes.Buffer
		code := Run(context.Background(), tc.args, &out, &errOut)
		if code != tc.code || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("opstask %q: exit %d, stderr %q; want exit %d and %q", tc.args, code, errOut.String(), tc.code, tc.want)
		}
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
