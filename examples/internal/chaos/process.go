package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Build builds the main package pkg (an import path or a directory, as go
// build takes it) into a binary of the test's own and returns its path. It
// uses the go command on PATH (else $GOROOT/bin/go), with the Go build
// cache.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
		if _, serr := os.Stat(goCmd); os.Getenv("GOROOT") == "" || serr != nil {
			t.Fatalf("chaos: no go command to build %s: %v", pkg, err)
		}
	}
	name := filepath.Base(pkg)
	if abs, err := filepath.Abs(pkg); err == nil && (name == "." || name == "..") {
		name = filepath.Base(abs)
	}
	bin := filepath.Join(t.TempDir(), name)
	start := time.Now()
	out, err := exec.Command(goCmd, "build", "-o", bin, pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("chaos: go build %s: %v\n%s", pkg, err, out)
	}
	t.Logf("chaos: built %s in %s", pkg, time.Since(start).Round(100*time.Millisecond))
	return bin
}

// Process runs each replica as a process of a binary, so that Replicas.Kill
// ends it with a real SIGKILL: the process dies at once, mid-request, with
// no deferred function or shutdown hook run. Use its Run as Replicas.Run.
type Process struct {
	// Binary is the program (see Build).
	Binary string
	// Args returns replica i's arguments, given the path of a kubeconfig
	// for its API server config.
	Args func(i int, kubeconfig string) []string
	// Dir holds the kubeconfigs (a test's TempDir).
	Dir string
	// Log receives the process's output, line by line, with its slot.
	Log logr.Logger
}

// Run runs replica i of the binary with cfg until it exits or ctx ends;
// then the process is killed with SIGKILL. It returns the process's exit
// error, nil if it was killed because ctx ended.
func (p Process) Run(ctx context.Context, cfg *rest.Config, i int) error {
	kubeconfig := filepath.Join(p.Dir, fmt.Sprintf("kubeconfig-%d", i))
	if err := writeKubeconfig(cfg, kubeconfig); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, p.Binary, p.Args(i, kubeconfig)...)
	// exec.CommandContext kills with SIGKILL when ctx ends; nothing waits
	// for a graceful exit. WaitDelay bounds the wait for the output pipe.
	cmd.WaitDelay = 5 * time.Second
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	log := p.Log.WithValues("replica", i)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(pr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			log.Info(sc.Text())
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	err := cmd.Start()
	if err == nil {
		log.Info("chaos: replica process started", "pid", cmd.Process.Pid)
		err = cmd.Wait()
	}
	_ = pw.Close()
	<-copied
	if ctx.Err() != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			log.Info("chaos: replica process killed", "state", exit.ProcessState.String())
		}
		return nil
	}
	return err
}

// writeKubeconfig writes cfg's server and credentials to path.
func writeKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["chaos"] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthority:     cfg.CAFile,
		CertificateAuthorityData: cfg.CAData,
		InsecureSkipTLSVerify:    cfg.Insecure,
		TLSServerName:            cfg.ServerName,
	}
	kc.AuthInfos["chaos"] = &clientcmdapi.AuthInfo{
		ClientCertificate:     cfg.CertFile,
		ClientCertificateData: cfg.CertData,
		ClientKey:             cfg.KeyFile,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
		TokenFile:             cfg.BearerTokenFile,
	}
	kc.Contexts["chaos"] = &clientcmdapi.Context{Cluster: "chaos", AuthInfo: "chaos"}
	kc.CurrentContext = "chaos"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("chaos: write kubeconfig %s: %w", path, err)
	}
	return nil
}
