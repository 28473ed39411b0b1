package plugin_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/groundskeeper-io/groundskeeper/cmd/kubectl-groundskeeper/plugin"
)

func TestHelpListsEveryCommandWithExamples(t *testing.T) {
	r := run(t, plugin.Options{}, "--help")
	if r.code != plugin.ExitOK {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	for _, want := range []string{"kubectl groundskeeper [command]", "explain", "backups", "claims", "lock", "tasks", "prefix", "completion", "--kubeconfig", "--context", "-n, --namespace", "Examples:"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
	for _, sub := range [][]string{{"explain"}, {"backups"}, {"claims"}, {"claims", "fate"}, {"lock"}, {"lock", "deny"}, {"lock", "allow"}, {"tasks"}, {"tasks", "approve"}, {"tasks", "wait"}, {"prefix"}, {"prefix", "rm"}} {
		r := run(t, plugin.Options{}, append(sub, "--help")...)
		if r.code != plugin.ExitOK || !strings.Contains(r.out, "Examples:") || !strings.Contains(r.out, "kubectl groundskeeper "+strings.Join(sub, " ")) {
			t.Errorf("%s --help: exit %d, no examples naming the command:\n%s", strings.Join(sub, " "), r.code, r.out)
		}
	}
}

func TestMountedUnderAnotherName(t *testing.T) {
	r := run(t, plugin.Options{Name: "kubectl myoperator", Tasks: "mytasks.example.com"}, "tasks", "--help")
	if !strings.Contains(r.out, "kubectl myoperator tasks") || !strings.Contains(r.out, `(default "mytasks.example.com")`) {
		t.Errorf("tasks --help does not show the operator's name and default resource:\n%s", r.out)
	}
}

func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		r := run(t, plugin.Options{}, "completion", shell)
		if r.code != plugin.ExitOK || !strings.Contains(r.out, "groundskeeper") {
			t.Errorf("completion %s: exit %d, %d bytes", shell, r.code, len(r.out))
		}
	}
	r := run(t, plugin.Options{}, "__complete", "lock", "-o", "")
	for _, f := range []string{"table", "wide", "json", "yaml", "name"} {
		if !strings.Contains(r.out, f+"\n") {
			t.Errorf("completion of -o lacks %s:\n%s", f, r.out)
		}
	}
}

func TestBadUsageIsExitTwo(t *testing.T) {
	for _, args := range [][]string{
		{"frobnicate"},
		{"lock", "--no-such-flag"},
		{"explain"},
		{"lock", "deny"},
		{"lock", "-o", "xml", "--configmap", "x"},
		{"claims", "fate", "db"},
		{"claims", "fate", "db", "--scale-to", "1", "--delete"},
		{"prefix"},
		{"prefix", "rm", "s3://b/db", "--yes"},
		{"lock", "--etcd-endpoints", "etcd-0:2379"},
	} {
		r := run(t, plugin.Options{}, args...)
		oneLineError(t, r, plugin.ExitUsage)
	}
}

func TestNoKubeconfigIsOneLine(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-kubeconfig")
	r := run(t, plugin.Options{}, "lock", "--configmap", "x", "--kubeconfig", missing)
	oneLineError(t, r, plugin.ExitError, missing)
}

// With no kubeconfig anywhere (no flag, no $KUBECONFIG, no ~/.kube/config,
// not in a pod), a command says so in one line rather than connect to
// localhost:8080, as kubectl's loader would, and print discovery errors.
func TestNoKubeconfigAnywhereIsOneLine(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	for _, args := range [][]string{
		{"tasks", "--resource", "etcdopstasks.ops.example.com"},
		{"lock", "--configmap", "x"},
		{"claims"},
	} {
		r := run(t, plugin.Options{}, args...)
		oneLineError(t, r, plugin.ExitError, "no kubeconfig: pass --kubeconfig")
	}
}
