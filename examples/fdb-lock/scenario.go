package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/memlock"
	"github.com/groundskeeper-io/groundskeeper/subreconcile"
)

// The scenario: two operator instances, dc1 and dc2, reconcile one Database
// on an in-memory lock and a simulated clock. A tiny event loop plays the
// API server and the workqueue: it hands each instance the stored object,
// requeues it when its loop asks, wakes every instance when the user edits
// the spec, and retries a failed loop after errorRetry.
const errorRetry = 30 * time.Second

var scenarioStart = time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)

type sim struct {
	out     io.Writer
	clk     *clocktesting.FakeClock
	c       client.Client // what the "API server" holds: a fake client
	insts   []*simInstance
	script  []scriptEvent
	killing string // instance whose operator dies in its next operation
}

type simInstance struct {
	id      string
	runner  *subreconcile.Runner[*Database, *loopState]
	running bool
	next    *time.Time // pending reconcile, as in a workqueue: at most one
}

type scriptEvent struct {
	at time.Duration
	do func()
}

func runScenario(out io.Writer) error {
	s := &sim{out: out, clk: clocktesting.NewFakeClock(scenarioStart),
		c: fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&Database{}).Build()}
	backend := memlock.New()
	for _, id := range []string{"dc1", "dc2"} {
		o := &operator{
			controllerOptions: controllerOptions{lockID: id, lockDuration: locking.DefaultDuration, deniedRetry: 5 * time.Minute, clock: s.clk},
			backend:           backend,
			live:              s.c,
			c:                 s.c,
			actor:             simActor{s},
		}
		r, err := o.newRunner(subreconcile.Config[*Database, *loopState]{Clock: s.clk})
		if err != nil {
			return err
		}
		s.insts = append(s.insts, &simInstance{id: id, runner: r})
	}
	dc1, dc2 := s.insts[0], s.insts[1]

	fmt.Fprintf(out, "Simulated timeline, %s UTC. Locks last %s.\n\n", scenarioStart.Format(time.DateOnly), locking.DefaultDuration)
	s.at(0, func() {
		s.must(s.c.Create(context.Background(), &Database{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "orders", Generation: 1},
			Spec: DatabaseSpec{
				Version:           "7.3.43",
				Coordinators:      5,
				ExcludedProcesses: []string{"dc1-storage-3"},
			},
			Status: DatabaseStatus{
				Coordinators:    3,
				RunningVersions: map[string]string{"dc1": "7.1.26", "dc2": "7.1.26"},
			},
		}))
		s.say("user", `creates database "orders": version 7.3.43, 5 coordinators, exclude dc1-storage-3 (it runs 7.1.26 on 3 coordinators)`)
		s.killing = "dc1"
		s.start(dc1)
		s.start(dc2)
	})
	s.at(12*time.Minute, func() {
		s.edit(`adds dc1 to spec.lockOptions.denyList before restarting it`, func(d *Database) {
			d.Spec.LockOptions.DenyList = []DenyListEntry{{ID: "dc1"}}
		})
	})
	s.at(13*time.Minute, func() {
		s.say("user", "restarts dc1's operator")
		s.start(dc1)
	})
	s.at(20*time.Minute, func() {
		s.edit(`sets {id: dc1, allow: true} in spec.lockOptions.denyList`, func(d *Database) {
			d.Spec.LockOptions.DenyList = []DenyListEntry{{ID: "dc1", Allow: true}}
		})
	})
	s.at(25*time.Minute, func() {
		s.edit(`sets spec.lockOptions.disableLocks (the database is unavailable) and version 7.3.44`, func(d *Database) {
			d.Spec.LockOptions.DisableLocks = true
			d.Spec.Version = "7.3.44"
		})
	})
	return s.run()
}

func (s *sim) at(d time.Duration, do func()) { s.script = append(s.script, scriptEvent{d, do}) }

func (s *sim) say(who, what string) {
	fmt.Fprintf(s.out, "%s  %-4s  %s\n", clockTime(s.clk.Now()), who, what)
}

func (s *sim) start(in *simInstance) {
	in.running = true
	s.enqueue(in, 0)
}

// enqueue adds a reconcile after d, keeping an earlier one if pending.
func (s *sim) enqueue(in *simInstance, d time.Duration) {
	t := s.clk.Now().Add(d)
	if in.next == nil || t.Before(*in.next) {
		in.next = &t
	}
}

// edit changes the spec, and every running instance sees the change at once.
func (s *sim) edit(what string, change func(*Database)) {
	d := s.db()
	change(d)
	d.Generation++
	s.must(s.c.Update(context.Background(), d))
	s.say("user", what)
	for _, in := range s.insts {
		if in.running {
			s.enqueue(in, 0)
		}
	}
}

// run plays the script and the instances' loops in time order, the script
// first at equal times, then the instances in order.
func (s *sim) run() error {
	for {
		at, do := time.Time{}, func() {}
		if len(s.script) > 0 {
			at, do = scenarioStart.Add(s.script[0].at), func() { s.script[0].do(); s.script = s.script[1:] }
		}
		for _, in := range s.insts {
			if in.running && in.next != nil && (at.IsZero() || in.next.Before(at)) {
				in := in
				at, do = *in.next, func() { in.next = nil; s.reconcile(in) }
			}
		}
		if at.IsZero() {
			fmt.Fprintf(s.out, "\nEnd: %s\n", s.summary())
			return nil
		}
		s.clk.SetTime(at)
		do()
	}
}

func (s *sim) reconcile(in *simInstance) {
	out := in.runner.Run(context.Background(), s.db())
	for _, a := range out.Acted {
		for _, what := range a.Actions {
			s.say(in.id, a.Name+": "+what)
		}
		if a.Requeue != nil && a.Requeue.Err == nil {
			s.say(in.id, a.Name+": "+a.Requeue.Message)
		}
	}
	switch {
	case !in.running:
		s.say(in.id, out.StoppedAt+": the operator is killed mid-bounce; nothing releases its lock")
	case out.Err != nil:
		s.say(in.id, fmt.Sprintf("error: %v; retry in %s", out.Err, errorRetry))
		s.enqueue(in, errorRetry)
	case out.RequeueAfter > 0:
		s.say(in.id, fmt.Sprintf("requeue in %s", out.RequeueAfter))
		s.enqueue(in, out.RequeueAfter)
	}
}

func (s *sim) summary() string {
	st := s.db().Status
	return fmt.Sprintf("%d coordinators, excluded %v, dc1 runs %s, dc2 runs %s",
		st.Coordinators, st.ExcludedProcesses, st.RunningVersions["dc1"], st.RunningVersions["dc2"])
}

// db reads the database from the fake API server.
func (s *sim) db() *Database {
	var d Database
	s.must(s.c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "orders"}, &d))
	return &d
}

// must stops the scenario on an error of the fake API server, which has
// none unless the scenario itself is wrong.
func (s *sim) must(err error) {
	if err != nil {
		panic(fmt.Sprintf("scenario: %v", err))
	}
}

var errKilled = errors.New("operator pod killed")

// simActor carries out operations instantly, except that the instance named
// in sim.killing dies in the middle of a bounce.
type simActor struct{ s *sim }

func (a simActor) Act(_ context.Context, instance, operation string) error {
	if a.s.killing == instance && strings.HasPrefix(operation, "bounced") {
		a.s.killing = ""
		for _, in := range a.s.insts {
			if in.id == instance {
				in.running, in.next = false, nil
			}
		}
		return errKilled
	}
	return nil
}
