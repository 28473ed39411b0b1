package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BinDirEnv names the environment variable that overrides where the
// component binaries are looked up. Without it they are looked up in
// .cache/bin at the root of the groundskeeper module when the tests run
// inside it, and otherwise in bin under the machine's groundskeeper cache
// (${XDG_CACHE_HOME:-$HOME/.cache}/groundskeeper/bin): `make testenv` links
// them into both.
const BinDirEnv = "GROUNDSKEEPER_TESTENV_BIN"

// DataDirEnv names the environment variable that sets the directory in
// which the components keep their data (etcd, MinIO, fake-gcs-server,
// Azurite, the control plane's certificates), one fresh directory each,
// removed when the test binary ends. Without it they go in os.TempDir.
// A memory file system makes the object stores several times faster:
// MinIO syncs each object it writes, which on a disk costs more than the
// request itself (measured: 15,000 small objects written by 32 clients in
// 38 s on disk, 14 s on tmpfs). make test sets it to /dev/shm where that is writable;
// make bench does not, so that its figures are a disk's.
const DataDirEnv = "GROUNDSKEEPER_TESTENV_DATA"

// Main runs the tests of a package and then stops every component they
// started. Call it from TestMain:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
//
// Components are also killed if the test binary dies without reaching the end
// of Main (they run with a parent-death signal). Their data directories are
// then left behind until the next test binary that starts a component
// removes them: each directory names the binary it belongs to, and a binary
// removes those of binaries that are no longer running.
//
// Main makes controller-runtime's global logger write to the running
// tests (see [Logger]).
func Main(m *testing.M) {
	setGlobalLogger()
	code := m.Run()
	stopAll()
	os.Exit(code)
}

// registry of started components, stopped by Main in reverse start order.
var (
	startedMu sync.Mutex
	started   []*process
)

func stopAll() {
	startedMu.Lock()
	procs := started
	started = nil
	startedMu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].stop()
	}
	for _, dir := range tempDirs {
		os.RemoveAll(dir)
	}
}

// inCI reports whether a missing component must fail a test rather than skip
// it.
func inCI() bool {
	v := strings.ToLower(os.Getenv("CI"))
	return v == "true" || v == "1"
}

// unavailable fails the test under CI and skips it elsewhere, with a message
// that says how to get the component.
func unavailable(t testing.TB, err error) {
	t.Helper()
	if inCI() || !errors.Is(err, errNotBuilt) {
		t.Fatalf("testenv: %v", err)
	}
	t.Skipf("testenv: %v (run `make testenv` in a clone of github.com/groundskeeper-io/groundskeeper, or set %s)", err, BinDirEnv)
}

// skipInShortMode skips a test that needs a real component when go test
// runs with -short: make test runs the library's unit tests that way at the
// oldest dependency versions it supports, and every test, these included,
// at the newest.
func skipInShortMode(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("testenv: needs a real component; -short runs unit tests only")
	}
}

var errNotBuilt = errors.New("component binary not found")

// binary returns the path of a component binary.
func binary(name string) (string, error) {
	dir, err := binDir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%s: %w at %s", name, errNotBuilt, path)
	}
	return path, nil
}

// binDir returns the directory of the component binaries: BinDirEnv, then
// .cache/bin of the groundskeeper module the tests run in, then the bin
// folder of the machine's cache.
func binDir() (string, error) {
	if dir := os.Getenv(BinDirEnv); dir != "" {
		return dir, nil
	}
	if root, ok := moduleRoot(); ok {
		return filepath.Join(root, ".cache", "bin"), nil
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("testenv: no home directory to find the components in; set %s: %w", BinDirEnv, err)
		}
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "groundskeeper", "bin"), nil
}

// moduleRoot walks up from the working directory (a package directory under
// `go test`) to the directory holding groundskeeper's go.mod, if the tests
// run inside that module.
func moduleRoot() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(data, []byte("module github.com/groundskeeper-io/groundskeeper\n")) {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

var (
	tempMu    sync.Mutex
	tempDirs  []string
	sweepOnce sync.Once
)

// ownerFile is the file in each directory made by tempDir that names the
// test binary it belongs to (see processID).
const ownerFile = ".groundskeeper-owner"

// tempDir makes a directory that lives as long as the test binary: shared
// components outlive the test that started them, so t.TempDir will not do.
// The first call removes the directories of test binaries that died before
// Main could remove them (a killed benchmark leaves gigabytes of MinIO
// data).
func tempDir(name string) (string, error) {
	parent := os.Getenv(DataDirEnv)
	if parent == "" {
		parent = os.TempDir()
	}
	sweepOnce.Do(func() { sweepStale(parent) })
	dir, err := os.MkdirTemp(parent, "groundskeeper-"+name+"-")
	if err != nil {
		return "", fmt.Errorf("testenv: data directory for %s (%s=%q): %w", name, DataDirEnv, os.Getenv(DataDirEnv), err)
	}
	tempMu.Lock()
	tempDirs = append(tempDirs, dir)
	tempMu.Unlock()
	if id, ok := processID(os.Getpid()); ok {
		if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(id), 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// sweepStale removes the directories tempDir made in parent for test
// binaries that are no longer running. A directory without an owner file
// (being made, or made by an older version) is left alone.
func sweepStale(parent string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "groundskeeper-") {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		owner, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		pid, _, _ := strings.Cut(string(owner), " ")
		n, err := strconv.Atoi(pid)
		if err != nil {
			continue
		}
		if id, alive := processID(n); alive && id == string(owner) {
			continue
		}
		os.RemoveAll(dir)
	}
}

// processID returns an identity of the running process pid: on Linux its
// PID and start time, so that a PID reused by another process does not
// pass for the process that held it; elsewhere its PID. alive is false
// when no process has that PID.
func processID(pid int) (id string, alive bool) {
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// The start time is field 22; field 2, the command name, is in
		// parentheses and may hold spaces.
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 {
			if f := strings.Fields(string(stat[i+1:])); len(f) > 19 {
				return fmt.Sprintf("%d %s", pid, f[19]), true
			}
		}
	}
	if _, err := os.Stat("/proc/self/stat"); err == nil {
		return "", false // /proc works and has no such process
	}
	err := syscall.Kill(pid, 0)
	return strconv.Itoa(pid), err == nil || errors.Is(err, syscall.EPERM)
}

// freePort returns a loopback port that was free a moment ago. Another
// process may take it before the component binds it; start retries then.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// process is a running component.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed when the process has exited
	err     error         // exit status, valid after done
}

// startProcess starts a component with its output in dir/<name>.log.
func startProcess(name, dir string, env []string, path string, args ...string) (*process, error) {
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("%s: start: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	startedMu.Lock()
	started = append(started, p)
	startedMu.Unlock()
	return p, nil
}

// stop terminates the process group, politely first.
func (p *process) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// logTail returns the last lines of the component's log.
func (p *process) logTail() string {
	data, _ := os.ReadFile(p.logPath)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 25 {
		lines = lines[len(lines)-25:]
	}
	return strings.Join(lines, "\n")
}

// waitReady polls ready until it succeeds, the process exits or the timeout
// passes. The error names the component and carries the tail of its log.
func (p *process) waitReady(timeout time.Duration, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return p.waitReadyCtx(ctx, ready)
}

// waitReadyCtx is waitReady until ctx ends. When it fails, the process is
// stopped.
func (p *process) waitReadyCtx(ctx context.Context, ready func(context.Context) error) error {
	var last error
	for {
		attempt, cancelAttempt := context.WithTimeout(ctx, 2*time.Second)
		last = ready(attempt)
		cancelAttempt()
		if last == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before it was ready (%v); log %s ends with:\n%s", p.name, p.err, p.logPath, p.logTail())
		case <-ctx.Done():
			p.stop()
			return fmt.Errorf("%s not ready: %v (%v); log %s ends with:\n%s", p.name, ctx.Err(), last, p.logPath, p.logTail())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// startWithRetry starts a component on fresh ports up to three times: a port
// found free may be taken by a concurrently running test binary before the
// component binds it.
func startWithRetry[T any](start func() (T, error)) (T, error) {
	var (
		v   T
		err error
	)
	for range 3 {
		if v, err = start(); err == nil || errors.Is(err, errNotBuilt) {
			return v, err
		}
	}
	return v, err
}

// shared is a component started at most once per test binary, on first use.
type shared[T any] struct {
	once sync.Once
	v    T
	err  error
}

func (s *shared[T]) get(start func() (T, error)) (T, error) {
	s.once.Do(func() { s.v, s.err = startWithRetry(start) })
	return s.v, s.err
}

// uniqueName derives a DNS-1123 label from the test's name, unique within the
// test binary.
func uniqueName(t testing.TB, maxLen int) string {
	nameMu.Lock()
	nameSeq++
	seq := nameSeq
	nameMu.Unlock()
	var b strings.Builder
	for _, r := range strings.ToLower(t.Name()) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			if s := b.String(); s != "" && !strings.HasSuffix(s, "-") {
				b.WriteByte('-')
			}
		}
	}
	suffix := fmt.Sprintf("-%d", seq)
	base := strings.Trim(b.String(), "-")
	if len(base) > maxLen-len(suffix) {
		base = strings.TrimRight(base[:maxLen-len(suffix)], "-")
	}
	if base == "" {
		base = "t"
	}
	return base + suffix
}

var (
	nameMu  sync.Mutex
	nameSeq int
)
