package kubecmd

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoggerLevels(t *testing.T) {
	for _, level := range []string{"debug", "info", "error", "3"} {
		f := Flags{LogLevel: level}
		log, err := f.Logger()
		if err != nil {
			t.Fatalf("--zap-log-level %s: %v", level, err)
		}
		if level == "3" && !log.V(3).Enabled() {
			t.Errorf("--zap-log-level 3: V(3) is not enabled")
		}
		if level == "error" && log.V(0).Enabled() {
			t.Errorf("--zap-log-level error: info is enabled")
		}
	}
	f := Flags{LogLevel: "loud"}
	if _, err := f.Logger(); err == nil || !strings.Contains(err.Error(), `--zap-log-level "loud"`) {
		t.Errorf("--zap-log-level loud: got %v, want an error naming the flag and value", err)
	}
}

func TestRestConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kubeconfig")
	const kubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: team-a}}]
current-context: x
`
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	var f Flags
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	f.Register(fs, "")
	if fs.Lookup("leader-elect") != nil {
		t.Errorf("--leader-elect registered without help text")
	}
	if err := fs.Parse([]string{"--kubeconfig", path, "--namespace="}); err != nil {
		t.Fatal(err)
	}
	cfg, err := f.RestConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:6443" || cfg.BearerToken != "t" {
		t.Errorf("config: host %q token %q", cfg.Host, cfg.BearerToken)
	}
	if f.Namespace != "team-a" {
		t.Errorf("namespace %q, want the kubeconfig's team-a", f.Namespace)
	}

	missing := Flags{Kubeconfig: filepath.Join(dir, "nope")}
	if _, err := missing.RestConfig(); err == nil || !strings.Contains(err.Error(), "--kubeconfig") {
		t.Errorf("missing kubeconfig: got %v, want an error naming --kubeconfig", err)
	}
}
