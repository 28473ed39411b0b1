package main

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/memlock"
	"github.com/groundskeeper-io/groundskeeper/subreconcile"
)

// lateBackend is a backend whose transactions return after the lock they
// wrote has run out: the commit hung for longer than the lock lasts.
type lateBackend struct {
	locking.Backend
	clk  *clocktesting.FakeClock
	hang time.Duration
}

func (b lateBackend) Update(ctx context.Context, fn func(locking.Txn) error) error {
	err := b.Backend.Update(ctx, fn)
	b.clk.Step(b.hang)
	return err
}

type memDatabases struct{ db *Database }

func (d *memDatabases) Get(context.Context, string, string) (*Database, error) {
	return d.db.DeepCopy(), nil
}

func (d *memDatabases) UpdateStatus(_ context.Context, db *Database) (*Database, error) {
	d.db.Status = db.DeepCopy().Status
	return d.db.DeepCopy(), nil
}

type recordingActor struct{ acted []string }

func (a *recordingActor) Act(_ context.Context, _, operation string) error {
	a.acted = append(a.acted, operation)
	return nil
}

// A global step acts only while the lock it took is still ours: a Take that
// returns after the lock ran out (another instance may hold it by then)
// acts on nothing and comes back.
func TestGlobalStepNeverActsOnALockThatRanOut(t *testing.T) {
	for _, tc := range []struct {
		name    string
		hang    time.Duration
		wantAct bool
	}{
		{"take returns within the lock's duration", time.Minute, true},
		{"take returns after the lock ran out", locking.DefaultDuration + time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(scenarioStart)
			dbs := &memDatabases{db: &Database{
				ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "orders", Generation: 1},
				Spec:       DatabaseSpec{Coordinators: 5},
				Status:     DatabaseStatus{Coordinators: 3},
			}}
			act := &recordingActor{}
			o := &operator{id: "dc1", backend: lateBackend{memlock.New(), clk, tc.hang},
				lockConfig: locking.Config{Clock: clk}, dbs: dbs, actor: act, deniedRetry: time.Minute}
			r, err := o.newRunner(subreconcile.Config[*Database, *loopState]{Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			out := r.Run(context.Background(), dbs.db.DeepCopy())
			if acted := len(act.acted) > 0; acted != tc.wantAct {
				t.Fatalf("acted %v (%q), want %v; outcome %+v", acted, act.acted, tc.wantAct, out)
			}
			if !tc.wantAct {
				if dbs.db.Status.Coordinators != 3 {
					t.Errorf("status changed to %d coordinators without acting", dbs.db.Status.Coordinators)
				}
				if !strings.Contains(strings.Join(out.Messages, "; "), "ran out") || out.RequeueAfter <= 0 {
					t.Errorf("outcome %+v, want a requeue saying the lock ran out", out)
				}
			}
		})
	}
}
