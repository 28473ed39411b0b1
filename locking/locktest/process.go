package locktest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/groundskeeper-io/groundskeeper/locking"
)

// childEnv carries a child process's HammerOptions, as JSON, and where to
// write its history.
const childEnv = "LOCKTEST_HAMMER_CHILD"

type childSpec struct {
	Options HammerOptions `json:"options"`
	Out     string        `json:"out"`
}

type childResult struct {
	History *History `json:"history"`
	Err     string   `json:"err,omitempty"`
}

// HammerChild makes the test binary a hammering child process when it was
// started by HammerProcesses; otherwise it returns at once. Call it first in
// TestMain:
//
//	func TestMain(m *testing.M) {
//		locktest.HammerChild(func(ctx context.Context) (locking.Backend, error) {
//			return connect(os.Getenv("MY_BACKEND_ADDRESS"))
//		})
//		testenv.Main(m)
//	}
//
// newBackend connects to the backend the parent named in the environment
// it passed to HammerProcesses. The child runs Hammer, writes its history
// for the parent and exits.
func HammerChild(newBackend func(ctx context.Context) (locking.Backend, error)) {
	v := os.Getenv(childEnv)
	if v == "" {
		return
	}
	var spec childSpec
	if err := json.Unmarshal([]byte(v), &spec); err != nil {
		fmt.Fprintf(os.Stderr, "locktest: %s: %v\n", childEnv, err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), spec.Options.Duration+2*time.Minute)
	defer cancel()
	var res childResult
	backend, err := newBackend(ctx)
	if err == nil {
		res.History, err = Hammer(ctx, backend, spec.Options)
	}
	if err != nil {
		res.Err = err.Error()
	}
	data, err := json.Marshal(res)
	if err == nil {
		err = os.WriteFile(spec.Out, data, 0o600)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "locktest: writing the history: %v\n", err)
		os.Exit(2)
	}
	os.Exit(0)
}

// HammerProcesses runs Hammer in processes child processes (the test binary
// itself, re-executed; see HammerChild) with o.Contenders contenders each,
// all on one lock clock, and merges their histories. env is added to each
// child's environment, to tell HammerChild's newBackend where the backend
// is; dir is a directory for the histories.
func HammerProcesses(ctx context.Context, processes int, env []string, dir string, o HammerOptions) (*History, error) {
	o.defaults()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		merged  History
		errs    []error
		cmdCtx  context.Context
		cancel  context.CancelFunc
		timeout = o.Duration + 2*time.Minute
	)
	cmdCtx, cancel = context.WithTimeout(ctx, timeout)
	defer cancel()
	for i := range processes {
		po := o
		po.IDPrefix = fmt.Sprintf("%sproc-%d-", o.IDPrefix, i)
		po.FirstClient = o.FirstClient + i*o.Contenders
		po.Seed = o.Seed + uint64(i)*7919
		out := filepath.Join(dir, fmt.Sprintf("history-%d.json", i))
		spec, err := json.Marshal(childSpec{Options: po, Out: out})
		if err != nil {
			return nil, err
		}
		cmd := exec.CommandContext(cmdCtx, os.Args[0], "-test.run=^$")
		cmd.Env = append(append(os.Environ(), env...), childEnv+"="+string(spec))
		wg.Add(1)
		go func() {
			defer wg.Done()
			output, err := cmd.CombinedOutput()
			fail := func(err error) {
				mu.Lock()
				errs = append(errs, fmt.Errorf("process %d: %w\n%s", i, err, output))
				mu.Unlock()
			}
			if err != nil {
				fail(err)
				return
			}
			data, err := os.ReadFile(out)
			if err != nil {
				fail(err)
				return
			}
			var res childResult
			if err := json.Unmarshal(data, &res); err != nil {
				fail(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if res.History != nil {
				merged.Ops = append(merged.Ops, res.History.Ops...)
			}
			if res.Err != "" {
				errs = append(errs, fmt.Errorf("process %d: %s", i, res.Err))
			}
		}()
	}
	wg.Wait()
	return &merged, errors.Join(errs...)
}
