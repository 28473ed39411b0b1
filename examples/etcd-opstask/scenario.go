package main

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/groundskeeper-io/groundskeeper/examples/etcd-opstask/api"
	"github.com/groundskeeper-io/groundskeeper/opstask"
	"github.com/groundskeeper-io/groundskeeper/opstask/memstore"
)

// The scenario: the real opstask controller and the real task kinds of
// kinds.go, over an in-memory task store, three simulated etcd clusters,
// buckets in a temporary directory and a simulated clock. The loop below
// plays the user and the passing of time: it creates tasks, runs the
// controller's Sync until nothing changes, then moves the clock on by one
// step. Every status write is printed, grouped by task.
const (
	simStep       = 10 * time.Second
	simDefaultTTL = 10 * time.Minute
	simNamespace  = "shoot--dev"
)

var scenarioStart = time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)

type sim struct {
	out   io.Writer
	dir   string // the buckets
	clk   *clocktesting.FakeClock
	mem   *memstore.Store
	etcds map[string]*simEtcd

	mu       sync.Mutex
	lines    []simLine         // printed at the end of each step
	seen     map[string]string // task key → last printed state and description
	order    map[string]int    // task key → creation order
	sleepers map[int]time.Time // simulated waits in progress, by id → wake time
	sleepID  int
}

type simLine struct {
	order, seq int
	created    bool // creations come first
	at         time.Time
	task, text string
}

func runScenario(out io.Writer) error {
	dir, err := os.MkdirTemp("", "etcd-opstask-scenario-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	s := &sim{out: out, dir: dir, clk: clocktesting.NewFakeClock(scenarioStart), seen: map[string]string{}, order: map[string]int{}, sleepers: map[int]time.Time{}}
	s.mem = memstore.New(s.clk)
	s.etcds = map[string]*simEtcd{
		"main":   {s: s, name: "main", members: 3, answering: 3, rev: 1200, dbSize: 48e6},
		"events": {s: s, name: "events", members: 3, answering: 3, rev: 5400, dbSize: 210e6, watchHangs: true},
		"broken": {s: s, name: "broken", members: 3, answering: 1, rev: 300, dbSize: 12e6},
	}
	bucket := func(name string) func(context.Context) (*blob.Bucket, error) {
		path := filepath.Join(dir, name)
		return func(ctx context.Context) (*blob.Bucket, error) {
			if err := os.MkdirAll(path, 0o755); err != nil {
				return nil, err
			}
			return fileblob.OpenBucket(path, nil)
		}
	}
	op := &operator{clock: s.clk, targets: map[string]*Target{}}
	for name, e := range s.etcds {
		op.targets[name] = &Target{Etcd: e, Backups: bucket("backups-" + name)}
	}
	// copyBackups stores: the container names a bucket of the simulation.
	op.openStore = func(ctx context.Context, _ string, spec api.StoreSpec) (*blob.Bucket, error) {
		b, err := bucket(spec.Container)(ctx)
		if err != nil || spec.Prefix == "" {
			return b, err
		}
		return blob.PrefixedBucket(b, spec.Prefix), nil
	}
	// The simulated snapshots are text, not etcd databases: the compaction
	// verifies the chain for real and writes a simulated full snapshot of
	// its last revision instead of restoring it into a temporary etcd.
	op.compact = func(_ context.Context, _ *blob.Bucket, c *chain, dir string) (*compacted, error) {
		data := fmt.Appendf(nil, "simulated compacted snapshot at revision %d\n", c.Revision())
		sum := sha256.Sum256(data)
		data = append(data, sum[:]...)
		out := &compacted{Path: filepath.Join(dir, "compacted.db"), Revision: c.Revision(), Bytes: int64(len(data)), DBBefore: 8 << 20, DBAfter: 2 << 20}
		m5 := md5.Sum(data)
		all := sha256.Sum256(data)
		out.MD5, out.SHA256 = m5[:], hex.EncodeToString(all[:])
		return out, os.WriteFile(out.Path, data, 0o600)
	}
	kinds := op.kinds()
	c, err := opstask.New(opstask.Config{
		Store:      recordingStore{s},
		Handlers:   kinds,
		Clock:      s.clk,
		DefaultTTL: simDefaultTTL,
		Settle:     opstask.NoSettle, // memstore: creation order is visible at once
	})
	if err != nil {
		return err
	}

	fmt.Fprintf(out, "Simulated timeline from %s UTC, namespace %s. Finished tasks are kept for their ttlSecondsAfterFinished, else %s.\n", scenarioStart.Format("2006-01-02 15:04"), simNamespace, simDefaultTTL)
	for _, name := range []string{"main", "events", "broken"} {
		e := s.etcds[name]
		fmt.Fprintf(out, "etcd %-7s %d members, %d answering, revision %d, backups in bucket backups-%s\n", name, e.members, e.answering, e.rev, name)
	}
	fmt.Fprintln(out)

	full := `{"type":"full"}`
	script := []struct {
		at   time.Duration
		what func() error
	}{
		{0, func() error {
			// Tasks for two clusters, interleaved: each cluster runs its own
			// in creation order, the two run side by side.
			for _, t := range []struct{ name, etcd, kind, config string }{
				{"main-maintenance", "main", "onDemandMaintenance", `{"maintenanceType":{"etcdCompaction":true,"etcdDefragmentation":true}}`},
				{"events-full", "events", "onDemandSnapshot", full},
				{"main-full", "main", "onDemandSnapshot", full},
				{"events-delta", "events", "onDemandSnapshot", `{"type":"delta","timeoutSecondsDelta":60}`},
				{"main-full-again", "main", "onDemandSnapshot", full},
				{"broken-full", "broken", "onDemandSnapshot", full},
				{"broken-recover", "broken", "recoverFromQuorumLoss", `{}`},
				{"main-recover", "main", "recoverFromQuorumLoss", `{}`},
			} {
				if err := s.create(t.name, t.etcd, t.kind, t.config, nil); err != nil {
					return err
				}
			}
			return nil
		}},
		{3 * time.Minute, func() error {
			s.etcds["main"].write(25)
			s.say("main", "the API server writes 25 keys to etcd main")
			return nil
		}},
		{4 * time.Minute, func() error {
			ttl := int32(120)
			if err := s.create("main-delta", "main", "onDemandSnapshot", `{"type":"delta"}`, &ttl); err != nil {
				return err
			}
			if err := s.create("main-compaction", "main", "snapshotCompaction", `{}`, &ttl); err != nil {
				return err
			}
			return s.create("events-compaction", "events", "snapshotCompaction", `{}`, &ttl)
		}},
		{5 * time.Minute, func() error {
			// After main-delta: a task without etcdName is in a queue of its
			// own and would run alongside main's tasks.
			ttl := int32(120)
			return s.create("copy-to-dr", "", "copyBackups",
				`{"sourceStore":{"provider":"S3","container":"backups-main"},"targetStore":{"provider":"GCS","container":"dr-main","prefix":"from-eu/"}}`, &ttl)
		}},
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for {
		for len(script) > 0 && !s.clk.Now().Before(scenarioStart.Add(script[0].at)) {
			if err := script[0].what(); err != nil {
				return err
			}
			script = script[1:]
		}
		for {
			if err := s.settle(c, kinds); err != nil {
				return err
			}
			before := s.lineCount()
			if _, err := c.Sync(ctx); err != nil {
				return err
			}
			if err := s.settle(c, kinds); err != nil {
				return err
			}
			if s.lineCount() == before {
				break
			}
		}
		s.flush()
		tasks, err := s.mem.List(ctx)
		if err != nil {
			return err
		}
		if len(script) == 0 && len(tasks) == 0 {
			break
		}
		s.clk.Step(simStep)
	}
	cancel()
	return s.summary()
}

func (s *sim) create(name, etcd, kind, config string, ttl *int32) error {
	t := &opstask.Task{Namespace: simNamespace, Name: name, Spec: opstask.Spec{
		Config:                  map[string]json.RawMessage{kind: json.RawMessage(config)},
		Target:                  etcd,
		TTLSecondsAfterFinished: ttl,
	}}
	if _, err := s.mem.Create(context.Background(), t); err != nil {
		return err
	}
	s.clk.Step(time.Millisecond) // distinct creation times, in creation order
	s.mu.Lock()
	s.order[t.Key()] = len(s.order)
	s.mu.Unlock()
	what := "created: " + kind + " " + config
	if etcd != "" {
		what += " for etcd " + etcd
	}
	if ttl != nil {
		what += fmt.Sprintf(", ttlSecondsAfterFinished %d", *ttl)
	}
	s.record(t.Key(), what)
	return nil
}

func (s *sim) say(who, what string) { s.record("", "("+who+") "+what) }

func (s *sim) record(key, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.order[key]
	if !ok {
		o = -1
	}
	_, name, _ := strings.Cut(key, "/")
	s.lines = append(s.lines, simLine{order: o, seq: len(s.lines), created: strings.HasPrefix(text, "created: "), at: s.clk.Now(), task: name, text: text})
}

func (s *sim) lineCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.lines)
}

// flush prints the lines of this step: creations, then the rest by task in
// creation order (tasks of different clusters run concurrently, so their
// writes interleave at random).
func (s *sim) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	sort.SliceStable(s.lines, func(i, j int) bool {
		if a, b := s.lines[i].created, s.lines[j].created; a != b {
			return a
		}
		return s.lines[i].order < s.lines[j].order
	})
	for _, l := range s.lines {
		fmt.Fprintf(s.out, "%s  %-18s %s\n", l.at.Format("15:04:05"), l.task, l.text)
	}
	s.lines = s.lines[:0]
}

// settle waits (in real time) until every InProgress task is in a simulated
// wait that ends later than now, before its timeout, and its claim was
// renewed at the latest renewal due and that renewal counted by c
// (Controller.Claimed), and until c runs no execution of a task that is no
// longer InProgress (one whose final status is written but whose slot is
// not yet free): until then a goroutine still has work to do at the current
// simulated time, or a Sync would not yet start the next task of that
// execution's etcd.
func (s *sim) settle(c *opstask.Controller, kinds []opstask.Handler) error {
	timeouts := map[string]func(*opstask.Task) (time.Duration, error){}
	for _, k := range kinds {
		timeouts[k.Name] = k.Timeout
	}
	// The deadline only ends a scenario that does not settle at all: on
	// a loaded machine under -race, a controller's goroutines may wait
	// seconds for the CPU (5 s was too short for CI runs).
	deadline := time.Now().Add(time.Minute)
	for {
		tasks, err := s.mem.List(context.Background())
		if err != nil {
			return err
		}
		now := s.clk.Now()
		busy := 0
		settled := true
		for _, t := range tasks {
			if t.State() != opstask.TaskStateInProgress {
				continue
			}
			busy++
			timeout := opstask.DefaultTimeout
			if f := timeouts[t.Kind()]; f != nil {
				if timeout, err = f(t); err != nil {
					return err
				}
			}
			if !now.Before(t.Status.StartedAt.Add(timeout)) {
				settled = false
			}
			// The controller renews its claim every third of the lease and
			// gives the execution up two thirds after its last write: a
			// renewal due at this simulated time must be written before the
			// clock moves on, as it would be in real time, and counted by
			// the controller, which counts it a moment after the store has
			// it: stepped before, the clock could reach the claim's
			// deadline first, and the claim would be given up.
			op := t.Status.LastOperation
			if op == nil || !op.LastUpdateTime.Add(opstask.DefaultLeaseDuration/3).After(now) {
				settled = false
			} else if at, ok := c.Claimed(t.Key()); !ok || at.Before(op.LastUpdateTime.Time) {
				settled = false
			}
		}
		s.mu.Lock()
		sleeping := 0
		for _, wake := range s.sleepers {
			if wake.After(now) {
				sleeping++
			} else {
				settled = false
			}
		}
		s.mu.Unlock()
		running := c.Running()
		if settled && busy == sleeping && running <= busy {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("scenario: %d tasks in progress, %d waiting, %d executions running, at %s: not settling", busy, sleeping, running, now.Format(time.TimeOnly))
		}
		time.Sleep(time.Millisecond)
	}
}

// sleep waits for d of simulated time, or until ctx ends.
func (s *sim) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.sleepID++
	id := s.sleepID
	s.sleepers[id] = s.clk.Now().Add(d)
	t := s.clk.NewTimer(d)
	s.mu.Unlock()
	defer func() {
		t.Stop()
		s.mu.Lock()
		delete(s.sleepers, id)
		s.mu.Unlock()
	}()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// summary lists what the tasks left in the buckets.
func (s *sim) summary() error {
	fmt.Fprintln(s.out, "\nObjects in the buckets at the end:")
	for _, name := range []string{"backups-main", "backups-events", "backups-broken", "dr-main"} {
		b, err := fileblob.OpenBucket(filepath.Join(s.dir, name), nil)
		if err != nil {
			fmt.Fprintf(s.out, "  %-15s (none)\n", name)
			continue
		}
		it := b.List(nil)
		var keys []string
		for {
			obj, err := it.Next(context.Background())
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Close()
				return err
			}
			keys = append(keys, obj.Key)
		}
		b.Close()
		if len(keys) == 0 {
			keys = []string{"(none)"}
		}
		fmt.Fprintf(s.out, "  %-15s %s\n", name, strings.Join(keys, ", "))
	}
	return nil
}

// recordingStore is the memstore, printing every change of a task's state
// or description and every deletion.
type recordingStore struct{ s *sim }

func (r recordingStore) List(ctx context.Context) ([]*opstask.Task, error) { return r.s.mem.List(ctx) }

func (r recordingStore) UpdateStatus(ctx context.Context, t *opstask.Task) error {
	if err := r.s.mem.UpdateStatus(ctx, t); err != nil {
		return err
	}
	st := t.Status
	desc := ""
	if st.LastOperation != nil {
		desc = st.LastOperation.Description
	}
	r.s.mu.Lock()
	prev := r.s.seen[t.Key()]
	now := string(t.State()) + "\x00" + desc
	r.s.seen[t.Key()] = now
	r.s.mu.Unlock()
	prevState, prevDesc, _ := strings.Cut(prev, "\x00")
	if prevState == "" {
		prevState = string(opstask.TaskStatePending)
	}
	switch {
	case prevState != string(t.State()):
		text := fmt.Sprintf("%s → %s", prevState, t.State())
		if desc != "" && desc != prevDesc {
			text += ": " + desc
		}
		if t.State() == opstask.TaskStateFailed || t.State() == opstask.TaskStateRejected {
			text += " [" + string(st.LastErrors[len(st.LastErrors)-1].Code) + "]"
		}
		r.s.record(t.Key(), text)
	case desc != prevDesc && desc != "":
		r.s.record(t.Key(), "  "+desc)
	}
	return nil
}

// SetHeld is the memstore's: holds are not part of the timeline.
func (r recordingStore) SetHeld(ctx context.Context, t *opstask.Task, held bool) error {
	return r.s.mem.SetHeld(ctx, t, held)
}

func (r recordingStore) Delete(ctx context.Context, t *opstask.Task) error {
	if err := r.s.mem.Delete(ctx, t); err != nil {
		return err
	}
	ttl := simDefaultTTL
	if p := t.Spec.TTLSecondsAfterFinished; p != nil {
		ttl = time.Duration(*p) * time.Second
	}
	r.s.record(t.Key(), fmt.Sprintf("deleted: finished %s ago (ttl %s)", r.s.clk.Since(t.Status.LastTransitionTime.Time).Round(time.Second), ttl))
	return nil
}

// simEtcd is a simulated etcd cluster: a revision counter and a log of key
// changes; snapshots are a line of text with etcd's SHA-256 trailer.
type simEtcd struct {
	s                  *sim
	name               string
	members, answering int
	watchHangs         bool // its watch never delivers (to show a timeout)

	mu        sync.Mutex
	rev       int64
	compacted int64
	log       []Event
	dbSize    int64
}

func (e *simEtcd) write(n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := 0; i < n; i++ {
		e.rev++
		e.log = append(e.log, Event{Type: "PUT", Key: fmt.Appendf(nil, "/registry/pods/default/web-%d", i), Value: []byte("{}"), ModRevision: e.rev})
		e.dbSize += 4096
	}
}

func (e *simEtcd) Health(context.Context) Health {
	h := Health{Members: e.members, Leader: e.answering > e.members/2}
	for i := 0; i < e.members; i++ {
		m := fmt.Sprintf("%s-%d", e.name, i)
		if i < e.answering {
			h.Answering = append(h.Answering, m)
		} else {
			h.Errors = append(h.Errors, m+": connection refused")
		}
	}
	return h
}

func (e *simEtcd) Revision(context.Context) (int64, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.rev, nil
}

func (e *simEtcd) Snapshot(_ context.Context, w io.Writer) (int64, error) {
	e.mu.Lock()
	data := fmt.Appendf(nil, "simulated snapshot of etcd %s at revision %d\n", e.name, e.rev)
	e.mu.Unlock()
	sum := sha256.Sum256(data)
	n, err := w.Write(append(data, sum[:]...))
	return int64(n), err
}

func (e *simEtcd) Events(ctx context.Context, from int64, fn func(Event) error) (int64, error) {
	if e.watchHangs {
		if err := e.s.sleep(ctx, 24*time.Hour); err != nil {
			return 0, err
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if from <= e.compacted {
		return e.rev, fmt.Errorf("events of etcd %s from revision %d: %w", e.name, from, rpctypes.ErrCompacted)
	}
	for _, ev := range e.log {
		if ev.ModRevision >= from {
			if err := fn(ev); err != nil {
				return e.rev, err
			}
		}
	}
	return e.rev, nil
}

func (e *simEtcd) Compact(context.Context) (int64, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.compacted = e.rev
	return e.rev, nil
}

// Defragment takes 40 simulated seconds per member.
func (e *simEtcd) Defragment(ctx context.Context, report func(Defragmented) error) error {
	for i := 0; i < e.members; i++ {
		if err := e.s.sleep(ctx, 40*time.Second); err != nil {
			return err
		}
		e.mu.Lock()
		before := e.dbSize
		after := before * 2 / 5
		if i == e.members-1 {
			e.dbSize = after
		}
		e.mu.Unlock()
		if err := report(Defragmented{Member: fmt.Sprintf("%s-%d", e.name, i), Before: before, After: after}); err != nil {
			return err
		}
	}
	return nil
}
