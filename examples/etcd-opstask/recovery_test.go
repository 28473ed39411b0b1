package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"

	"github.com/groundskeeper-io/groundskeeper/opstask"
	"github.com/groundskeeper-io/groundskeeper/opstask/memstore"
	"github.com/groundskeeper-io/groundskeeper/testenv"
	"github.com/groundskeeper-io/groundskeeper/testenv/faultproxy"
)

// processMembers is the stand-in for a StatefulSet: Members over the etcd
// processes of testenv. It does not model what a StatefulSet adds: pods
// scheduled (or not) onto nodes, volumes provisioned and deleted by a
// storage driver (RemoveData is instant), stable DNS names (the peer URLs
// are fixed loopback addresses), readiness probes, the ordinal order of
// pod creation, the backup-restore sidecar that restores in an init
// container, and TLS between members.
type processMembers struct {
	c *testenv.EtcdCluster

	mu    sync.Mutex
	calls []string
	// hold, if set, is called at the start of each call and may block it.
	hold func(ctx context.Context, call string) error
}

func (p *processMembers) member(name string) *testenv.EtcdMember {
	for _, m := range p.c.Members {
		if m.Name == name {
			return m
		}
	}
	panic("no member " + name)
}

func (p *processMembers) call(ctx context.Context, c string) error {
	p.mu.Lock()
	p.calls = append(p.calls, c)
	hold := p.hold
	p.mu.Unlock()
	if hold != nil {
		return hold(ctx, c)
	}
	return nil
}

func (p *processMembers) callList() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.calls...)
}

func (p *processMembers) List() []Member {
	var out []Member
	for _, m := range p.c.Members {
		out = append(out, Member{Name: m.Name, PeerURL: m.PeerURL, ClientURL: m.ClientURL})
	}
	return out
}

func (p *processMembers) Stop(ctx context.Context, name string) error {
	if err := p.call(ctx, "stop "+name); err != nil {
		return err
	}
	if err := p.member(name).Process.Stop(ctx); err != nil && !errors.Is(err, testenv.ErrNotRunning) {
		return err
	}
	return nil
}

func (p *processMembers) Wipe(ctx context.Context, name string) error {
	if err := p.call(ctx, "wipe "+name); err != nil {
		return err
	}
	return p.member(name).RemoveData()
}

func (p *processMembers) Restore(ctx context.Context, name, path string) error {
	if err := p.call(ctx, "restore "+name); err != nil {
		return err
	}
	m := p.member(name)
	return snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{
		SnapshotPath: path, Name: m.Name, OutputDataDir: m.DataDir, PeerURLs: []string{m.PeerURL},
		InitialCluster: m.Name + "=" + m.PeerURL, InitialClusterToken: "recovered",
	})
}

func (p *processMembers) Start(ctx context.Context, name, cluster, state string) error {
	if err := p.call(ctx, "start "+name); err != nil {
		return err
	}
	m := p.member(name)
	if err := m.Configure(cluster, state); err != nil {
		return err
	}
	return m.Process.Start(ctx)
}

// recoveryController runs an opstask controller of the operator's kinds
// over store, with a 3s lease, until the returned stop is called.
func recoveryController(t *testing.T, store *memstore.Store, op *operator) (stop func()) {
	c, err := opstask.New(opstask.Config{Store: store, Handlers: op.kinds(), LeaseDuration: 3 * time.Second, Settle: opstask.NoSettle})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	return func() { cancel(); <-done }
}

func waitTask(t *testing.T, store *memstore.Store, name string, cond func(*opstask.Task) bool) *opstask.Task {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		task, err := store.Get(t.Context(), "ns", name)
		if err == nil && cond(task) {
			return task
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s: condition not met in 3m: %+v", name, task)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func finished(task *opstask.Task) bool { return task.State().Finished() }

func step(task *opstask.Task, name string) opstask.Step {
	for _, s := range task.Status.Steps {
		if s.Name == name {
			return s
		}
	}
	return opstask.Step{}
}

// approval returns the approval of the step name (Run.Approval), recorded
// apart from the steps.
func approval(task *opstask.Task, name string) opstask.Approval {
	for _, a := range task.Status.Approvals {
		if a.Step == name {
			return a
		}
	}
	return opstask.Approval{}
}

// Recovery from a permanent loss of quorum, against three etcd processes:
// keys written, a full and a delta snapshot, one more write, then two
// members killed for good (data directories deleted). A task created
// while the cluster had quorum, even one with allowDataLoss and
// skipApproval, was rejected (QuorumPresent) and touched nothing. A task
// without allowDataLoss fails at its plan (the survivor is newer than the
// backups) and touches nothing. With allowDataLoss, the task states its
// recovery point, waits for approval, and its controller is stopped while
// it adds the second member; another takes over, does not repeat the
// completed steps, and finishes: three members with quorum, holding
// exactly the state of the last snapshot (the later write is lost, as the
// recovery point said).
func TestRecoveryFromPermanentQuorumLoss(t *testing.T) {
	// Isolated: its own 3-member etcd (newBackupWorld), file bucket
	// (TempDir), memstore and controllers; it kills only its own members.
	t.Parallel()
	w := newBackupWorld(t, 3)
	members := &processMembers{c: w.etcd}
	w.op.targets["main"].Members = members
	store := memstore.New(nil)
	create := func(name, config string) {
		run := task("recoverFromQuorumLoss", config)
		run.Task.Name = name
		if _, err := store.Create(t.Context(), run.Task); err != nil {
			t.Fatal(err)
		}
	}

	var ops []clientv3.Op
	for i := range 2000 {
		ops = append(ops, clientv3.OpPut("/registry/pods/p"+itoa(i), "v1-"+itoa(i)))
	}
	write(t, w.cli, ops)
	w.snapshot(t, "full")
	write(t, w.cli, []clientv3.Op{clientv3.OpPut("/registry/pods/p1", "v2"), clientv3.OpDelete("/registry/pods/p2")})
	w.snapshot(t, "delta")
	want, wantRev := state(t, w.cli)
	if _, err := w.cli.Put(t.Context(), "/registry/after-the-last-snapshot", "lost"); err != nil {
		t.Fatal(err)
	}

	stop1 := recoveryController(t, store, w.op)
	create("while-healthy", `{"allowDataLoss":true,"skipApproval":true}`)
	healthy := waitTask(t, store, "while-healthy", finished)
	if healthy.State() != opstask.TaskStateRejected || healthy.Status.LastErrors[0].Code != codeQuorumPresent {
		t.Fatalf("task created while the cluster has quorum: %s %+v; want Rejected, QuorumPresent", healthy.State(), healthy.Status.LastErrors)
	}

	for _, m := range w.etcd.Members[1:] {
		if err := m.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := m.RemoveData(); err != nil {
			t.Fatal(err)
		}
	}
	create("no-data-loss", `{}`)
	refused := waitTask(t, store, "no-data-loss", finished)
	if e := refused.Status.LastErrors; refused.State() != opstask.TaskStateFailed || len(e) != 1 || e[0].Code != codeDataLoss || !strings.Contains(e[0].Description, "are LOST") {
		t.Fatalf("recovery that would lose a survivor's data: %s %+v; want Failed, DataLossNotAllowed", refused.State(), e)
	}
	if calls := members.callList(); len(calls) != 0 {
		t.Fatalf("rejected and refused recoveries acted on the members: %v", calls)
	}
	if !w.etcd.Members[0].Process.Running() {
		t.Fatal("the surviving member was stopped by a refused recovery")
	}

	// The controller is stopped while the recovery adds member-1.
	adding := make(chan struct{})
	var once sync.Once
	members.hold = func(ctx context.Context, call string) error {
		if call == "start member-1" {
			first := false
			once.Do(func() { first = true })
			if first {
				close(adding)
				<-ctx.Done()
				return context.Cause(ctx)
			}
		}
		return nil
	}
	create("recover", `{"allowDataLoss":true}`)
	waiting := waitTask(t, store, "recover", func(task *opstask.Task) bool {
		return approval(task, "approve").State == opstask.ApprovalStateAwaiting
	})
	plan := step(waiting, "plan").Description
	if !strings.Contains(plan, "recovery point: revision "+itoa(int(wantRev))) || !strings.Contains(plan, "are LOST") {
		t.Errorf("plan: %q; want the recovery point, revision %d, and the loss", plan, wantRev)
	}
	if calls := members.callList(); len(calls) != 0 {
		t.Fatalf("the recovery acted before its approval: %v", calls)
	}
	token := regexp.MustCompile(`token (\S+) `).FindStringSubmatch(approval(waiting, "approve").Description)
	if token == nil {
		t.Fatalf("approval does not say its token: %q", approval(waiting, "approve").Description)
	}
	if err := store.Approve(t.Context(), "ns", "recover", token[1]); err != nil {
		t.Fatal(err)
	}
	select {
	case <-adding:
	case <-time.After(3 * time.Minute):
		t.Fatalf("the recovery did not reach member-1; steps %+v", waitTask(t, store, "recover", func(*opstask.Task) bool { return true }).Status.Steps)
	}
	stop1()
	interrupted, _ := store.Get(t.Context(), "ns", "recover")
	t.Logf("controller stopped; steps: %s", stepStates(interrupted))

	stop2 := recoveryController(t, store, w.op)
	defer stop2()
	done := waitTask(t, store, "recover", finished)
	if done.State() != opstask.TaskStateSucceeded {
		t.Fatalf("recovery: %s %+v, steps %s", done.State(), done.Status.LastErrors, stepStates(done))
	}
	t.Logf("steps: %s; %s", stepStates(done), done.Status.LastOperation.Description)
	if got := stepStates(done); got != "plan=Completed/1 check members=Completed/1 stop=Completed/1 restore=Completed/1 start member-0=Completed/1 add member-1=Completed/2 add member-2=Completed/1" {
		t.Errorf("steps %s; want each once, member-1's addition twice", got)
	}
	if d := done.Status.LastOperation.Description; !strings.Contains(d, "recovered etcd main: 3 members with quorum; recovery point: revision "+itoa(int(wantRev))) {
		t.Errorf("final description %q lacks the recovery point", d)
	}

	cli, err := clientv3.New(clientv3.Config{Endpoints: w.etcd.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	list, err := cli.MemberList(t.Context())
	if err != nil || len(list.Members) != 3 {
		t.Fatalf("members after the recovery: %v, %v", list, err)
	}
	got, _ := state(t, cli)
	if d := cmp.Diff(want, got, cmp.Comparer(func(a, b *mvccpb.KeyValue) bool {
		return string(a.Key) == string(b.Key) && string(a.Value) == string(b.Value) && a.ModRevision == b.ModRevision
	})); d != "" {
		t.Errorf("recovered state differs from the last snapshot's (-want +got):\n%.3000s", d)
	}
	if _, err := cli.Put(t.Context(), "/registry/after-recovery", "ok"); err != nil {
		t.Errorf("write after the recovery: %v", err)
	}
	for _, m := range w.etcd.Members {
		one, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := one.Get(t.Context(), "/registry/after-recovery")
		one.Close()
		if err != nil || len(resp.Kvs) != 1 {
			t.Errorf("%s after the recovery: %v, %v", m.Name, resp, err)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func stepStates(task *opstask.Task) string {
	var parts []string
	for _, s := range task.Status.Steps {
		parts = append(parts, fmt.Sprintf("%s=%s/%d", s.Name, s.State, s.Attempts))
	}
	return strings.Join(parts, " ")
}

// A cluster that regains quorum during a recovery stops it: two of three
// members killed (their data kept), the recovery task created, planned and
// held at its approval; the killed members restarted, the cluster healthy
// again; then the approval. The check before the stop finds the quorum
// and fails the task with MembersCameBack: no member was stopped, wiped or
// restored, all three run and hold their data.
func TestRecoveryStopsWhenMembersComeBack(t *testing.T) {
	// Isolated: its own etcd, bucket, memstore and controller.
	t.Parallel()
	w := newBackupWorld(t, 3)
	members := &processMembers{c: w.etcd}
	w.op.targets["main"].Members = members
	store := memstore.New(nil)

	var ops []clientv3.Op
	for i := range 200 {
		ops = append(ops, clientv3.OpPut("/registry/pods/p"+itoa(i), "v1-"+itoa(i)))
	}
	write(t, w.cli, ops)
	w.snapshot(t, "full")
	want, _ := state(t, w.cli)

	for _, m := range w.etcd.Members[1:] {
		if err := m.Process.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	stop := recoveryController(t, store, w.op)
	defer stop()
	run := task("recoverFromQuorumLoss", `{}`)
	run.Task.Name = "recover"
	if _, err := store.Create(t.Context(), run.Task); err != nil {
		t.Fatal(err)
	}
	waiting := waitTask(t, store, "recover", func(task *opstask.Task) bool {
		return approval(task, "approve").State == opstask.ApprovalStateAwaiting
	})
	token := regexp.MustCompile(`token (\S+) `).FindStringSubmatch(approval(waiting, "approve").Description)
	if token == nil {
		t.Fatalf("approval does not say its token: %q", approval(waiting, "approve").Description)
	}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for _, m := range w.etcd.Members[1:] {
		if err := m.Process.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range w.etcd.Members {
		if err := m.WaitHealthy(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.Approve(t.Context(), "ns", "recover", token[1]); err != nil {
		t.Fatal(err)
	}
	done := waitTask(t, store, "recover", finished)
	if e := done.Status.LastErrors; done.State() != opstask.TaskStateFailed || len(e) != 1 || e[0].Code != codeMembersReturn {
		t.Fatalf("recovery of a cluster whose members came back: %s %+v, steps %s; want Failed, MembersCameBack", done.State(), e, stepStates(done))
	}
	t.Logf("steps: %s; error: %s", stepStates(done), done.Status.LastErrors[0].Description)
	if got := stepStates(done); got != "plan=Completed/1 check members=Failed/1" {
		t.Errorf("steps %s; want the plan and the check before the stop failed (the approval is recorded apart)", got)
	}
	if calls := members.callList(); len(calls) != 0 {
		t.Errorf("the recovery acted on the members of a healthy cluster: %v", calls)
	}
	for _, m := range w.etcd.Members {
		if !m.Process.Running() {
			t.Errorf("%s is not running", m.Name)
		}
	}
	got, _ := state(t, w.cli)
	if d := cmp.Diff(want, got, cmp.Comparer(func(a, b *mvccpb.KeyValue) bool {
		return string(a.Key) == string(b.Key) && string(a.Value) == string(b.Value) && a.ModRevision == b.ModRevision
	})); d != "" {
		t.Errorf("the cluster's data changed (-before +after):\n%.3000s", d)
	}
}

// partitionedMembers is processMembers as the operator sees them across
// a network partition: the client URLs it lists lead through proxies the
// test can cut.
type partitionedMembers struct {
	*processMembers
	clientURLs map[string]string // member name → the URL the operator uses
}

func (p partitionedMembers) List() []Member {
	out := p.processMembers.List()
	for i, m := range out {
		if u, ok := p.clientURLs[m.Name]; ok {
			out[i].ClientURL = u
		}
	}
	return out
}

// The data-loss check is made again before anything is stopped. Three
// members: a full snapshot, one more write, then member-0 and member-2
// killed (their data kept) and member-1's client port cut off from the
// operator (a partition). No member answers the plan, so nothing is newer
// than the recovery point as far as it knows, and it waits for approval.
// Then the partition heals: member-1 answers with a revision newer than
// the recovery point, still without quorum. Approved, the recovery fails
// with DataLossNotAllowed naming member-1 and both revisions, and no member
// is stopped or wiped. A second recovery, planned and approved while
// member-1 is cut off again, fails the same way at the check: a member
// that does not answer is not one without data, unless allowDataLoss.
func TestRecoveryChecksMembersAgainBeforeTheStop(t *testing.T) {
	// Isolated: its own etcd, proxy, bucket, memstore and controller.
	t.Parallel()
	w := newBackupWorld(t, 3)
	proxy := faultproxy.Start(t, strings.TrimPrefix(w.etcd.Members[1].ClientURL, "http://"))
	proxied := "http://" + proxy.Addr()
	members := &processMembers{c: w.etcd}
	w.op.targets["main"].Members = partitionedMembers{processMembers: members, clientURLs: map[string]string{"member-1": proxied}}
	seen, err := newEtcdCluster([]string{w.etcd.Members[0].ClientURL, proxied, w.etcd.Members[2].ClientURL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seen.Close() })
	w.op.targets["main"].Etcd = seen
	store := memstore.New(nil)

	var ops []clientv3.Op
	for i := range 200 {
		ops = append(ops, clientv3.OpPut("/registry/pods/p"+itoa(i), "v1-"+itoa(i)))
	}
	write(t, w.cli, ops)
	w.snapshot(t, "full")
	_, point := state(t, w.cli)
	resp, err := w.cli.Put(t.Context(), "/registry/after-the-last-snapshot", "kept by member-1")
	if err != nil {
		t.Fatal(err)
	}
	newer := resp.Header.Revision
	for _, i := range []int{0, 2} {
		if err := w.etcd.Members[i].Process.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	proxy.SetRefuse(true)

	stop := recoveryController(t, store, w.op)
	defer stop()
	// approve waits for task name's approval step, calls meanwhile (the
	// plan is made and nothing asks the members until the approval), then
	// approves.
	approve := func(name string, meanwhile func()) {
		t.Helper()
		waiting := waitTask(t, store, name, func(task *opstask.Task) bool {
			return approval(task, "approve").State == opstask.ApprovalStateAwaiting || task.State().Finished()
		})
		if waiting.State().Finished() {
			t.Fatalf("task %s finished before its approval: %s %+v, steps %s", name, waiting.State(), waiting.Status.LastErrors, stepStates(waiting))
		}
		if plan := step(waiting, "plan").Description; !strings.Contains(plan, "member-0, member-1, member-2 did not answer") {
			t.Errorf("plan of %s: %q; want it to say that no member answered", name, plan)
		}
		token := regexp.MustCompile(`token (\S+) `).FindStringSubmatch(approval(waiting, "approve").Description)
		if token == nil {
			t.Fatalf("approval does not say its token: %q", approval(waiting, "approve").Description)
		}
		meanwhile()
		if err := store.Approve(t.Context(), "ns", name, token[1]); err != nil {
			t.Fatal(err)
		}
	}
	create := func(name string) {
		t.Helper()
		run := task("recoverFromQuorumLoss", `{}`)
		run.Task.Name = name
		if _, err := store.Create(t.Context(), run.Task); err != nil {
			t.Fatal(err)
		}
	}
	refused := func(name string, why ...string) {
		t.Helper()
		done := waitTask(t, store, name, finished)
		e := done.Status.LastErrors
		if done.State() != opstask.TaskStateFailed || len(e) != 1 || e[0].Code != codeDataLoss {
			t.Fatalf("recovery %s: %s %+v, steps %s; want Failed, DataLossNotAllowed", name, done.State(), e, stepStates(done))
		}
		t.Logf("%s: steps %s; error: %s", name, stepStates(done), e[0].Description)
		for _, w := range why {
			if !strings.Contains(e[0].Description, w) {
				t.Errorf("recovery %s: error %q; want it to say %q", name, e[0].Description, w)
			}
		}
		if got := stepStates(done); got != "plan=Completed/1 check members=Failed/1" {
			t.Errorf("recovery %s: steps %s; want the plan, the approval and the check failed", name, got)
		}
		if calls := members.callList(); len(calls) != 0 {
			t.Fatalf("recovery %s acted on the members: %v", name, calls)
		}
		if !w.etcd.Members[1].Process.Running() {
			t.Fatalf("recovery %s: member-1 is not running", name)
		}
		one, err := clientv3.New(clientv3.Config{Endpoints: []string{w.etcd.Members[1].ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		defer one.Close()
		got, err := one.Get(t.Context(), "/registry/after-the-last-snapshot", clientv3.WithSerializable())
		if err != nil || len(got.Kvs) != 1 || got.Header.Revision != newer {
			t.Fatalf("recovery %s: member-1's data after the refusal: %v, %v; want the write after the snapshot, revision %d", name, got, err, newer)
		}
	}

	create("partitioned")
	approve("partitioned", func() { proxy.SetRefuse(false) })
	refused("partitioned", fmt.Sprintf("member-1 has revision %d, newer than the recovery point %d", newer, point),
		"member-0 did not answer", "member-2 did not answer")

	proxy.SetRefuse(true)
	create("silent")
	approve("silent", func() {})
	refused("silent", "member-1 did not answer", "member-0 did not answer", "member-2 did not answer")
}

// What a recovery to revision 100 may wipe, before the stop and at it.
func TestCheckDataLoss(t *testing.T) {
	silent := errors.New("connection refused")
	at := func(name string, rev int64) memberAnswer { return memberAnswer{Name: name, Revision: rev} }
	for _, tc := range []struct {
		name          string
		answers       []memberAnswer
		allowDataLoss bool
		checked       map[string]int64
		refused       []string // what the error names; none: allowed
	}{
		{name: "every member at or below the recovery point", answers: []memberAnswer{at("m0", 100), at("m1", 90), at("m2", 100)}},
		{name: "one member newer", answers: []memberAnswer{at("m0", 100), at("m1", 130), at("m2", 90)},
			refused: []string{"m1 has revision 130, newer than the recovery point 100: revisions 101-130 would be LOST"}},
		{name: "one member does not answer", answers: []memberAnswer{at("m0", 100), {Name: "m1", Err: silent}},
			refused: []string{"m1 did not answer (connection refused)"}},
		{name: "newer and silent members, all named", answers: []memberAnswer{{Name: "m0", Err: silent}, at("m1", 101), {Name: "m2", Err: silent}},
			refused: []string{"m0 did not answer", "m1 has revision 101", "m2 did not answer"}},
		{name: "allowDataLoss: newer and silent members", answers: []memberAnswer{{Name: "m0", Err: silent}, at("m1", 500)}, allowDataLoss: true},
		{name: "at the stop: silent, at the recovery point at the check (stopped by an earlier attempt)",
			answers: []memberAnswer{{Name: "m0", Err: silent}, at("m1", 100)}, checked: map[string]int64{"m0": 100, "m1": 100}},
		{name: "at the stop: silent, not at the check", answers: []memberAnswer{{Name: "m0", Err: silent}, {Name: "m1", Err: silent}},
			checked: map[string]int64{"m0": 100}, refused: []string{"m1 did not answer"}},
		{name: "at the stop: newer now than at the check", answers: []memberAnswer{at("m0", 120)}, checked: map[string]int64{"m0": 100},
			refused: []string{"m0 has revision 120"}},
	} {
		err := checkDataLoss("main", "at the stop", tc.answers, 100, tc.allowDataLoss, tc.checked)
		if len(tc.refused) == 0 {
			if err != nil {
				t.Errorf("%s: %v, want nil", tc.name, err)
			}
			continue
		}
		var coded *opstask.CodedError
		if !errors.As(err, &coded) || coded.Code != codeDataLoss {
			t.Errorf("%s: %v, want DataLossNotAllowed", tc.name, err)
			continue
		}
		for _, w := range tc.refused {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", tc.name, err, w)
			}
		}
	}
}
