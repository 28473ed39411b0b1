package chaos

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func kinds(steps []Step) []string {
	var out []string
	for _, s := range steps {
		out = append(out, s.String())
	}
	return out
}

var testFaults = []Fault{
	{Kind: "restart etcd"},
	{Kind: "blackhole", Weight: 3, Targets: 3, Lasts: true},
	{Kind: "reset", Targets: 4},
}

func TestScheduleIsReproducible(t *testing.T) {
	a := NewSchedule(42, 10*time.Minute, testFaults, nil)
	b := NewSchedule(42, 10*time.Minute, testFaults, nil)
	c := NewSchedule(43, 10*time.Minute, testFaults, nil)
	if !slices.Equal(a, b) {
		t.Errorf("seed 42 twice gave different schedules:\n%s\n---\n%s", strings.Join(kinds(a), "\n"), strings.Join(kinds(b), "\n"))
	}
	if slices.Equal(a, c) {
		t.Error("seeds 42 and 43 gave the same schedule")
	}
}

func TestScheduleShape(t *testing.T) {
	o := &ScheduleOptions{MinGap: time.Second, MaxGap: 3 * time.Second, MinHold: 2 * time.Second, MaxHold: 4 * time.Second}
	steps := NewSchedule(7, 30*time.Minute, testFaults, o)
	seen := map[string]int{}
	var end time.Duration
	for _, s := range steps {
		seen[s.Kind]++
		if s.At < end+o.MinGap || s.At >= 30*time.Minute {
			t.Fatalf("step %s starts %s after the previous one ended, want %s to %s, and before 30m", s, s.At-end, o.MinGap, o.MaxGap)
		}
		switch s.Kind {
		case "blackhole":
			if s.Hold < o.MinHold || s.Hold >= o.MaxHold || s.Target < 0 || s.Target >= 3 {
				t.Fatalf("step %s: hold or target out of range", s)
			}
		default:
			if s.Hold != 0 {
				t.Fatalf("step %s: a fault that does not last has a hold", s)
			}
		}
		end = s.At + s.Hold
	}
	// Weight 3 of 5: blackhole is drawn most.
	if seen["blackhole"] <= seen["restart etcd"] || seen["blackhole"] <= seen["reset"] || seen["reset"] == 0 {
		t.Errorf("kinds drawn %v; want blackhole (weight 3) most, every kind some", seen)
	}
	if len(NewSchedule(7, time.Minute, nil, o)) != 0 {
		t.Error("a schedule without faults has steps")
	}
}

func TestSeedFromEnv(t *testing.T) {
	t.Setenv(SeedEnv, "")
	if s, err := SeedFromEnv(5); s != 5 || err != nil {
		t.Errorf("unset: %d, %v; want the default 5", s, err)
	}
	t.Setenv(SeedEnv, "123")
	if s, err := SeedFromEnv(5); s != 123 || err != nil {
		t.Errorf("123: %d, %v", s, err)
	}
	t.Setenv(SeedEnv, "abc")
	if _, err := SeedFromEnv(5); err == nil || !strings.Contains(err.Error(), SeedEnv) {
		t.Errorf("abc: %v; want an error naming %s", err, SeedEnv)
	}
	t.Setenv(DurationEnv, "")
	if _, long, err := LongDuration(); long || err != nil {
		t.Errorf("unset duration: long=%v, %v", long, err)
	}
	t.Setenv(DurationEnv, "3m")
	if d, long, err := LongDuration(); d != 3*time.Minute || !long || err != nil {
		t.Errorf("3m: %s %v %v", d, long, err)
	}
	t.Setenv(DurationEnv, "-1s")
	if _, _, err := LongDuration(); err == nil {
		t.Error("-1s accepted")
	}
}

// A run with faults that only count: the schedule is applied, the
// workload stops, settling and checking happen in order, and the table
// says what happened.
func TestRun(t *testing.T) {
	injected := map[string]int{}
	faults := []Fault{
		{Kind: "ok", Inject: func(context.Context, Step) error { injected["ok"]++; return nil }},
		{Kind: "broken", Inject: func(context.Context, Step) error { injected["broken"]++; return errors.New("no") }},
	}
	var workloadStopped time.Time
	polls := 0
	res := Run(context.Background(), Config{
		Name: "test", Seed: 3, Duration: 2 * time.Second, Faults: faults,
		Schedule: &ScheduleOptions{MinGap: 100 * time.Millisecond, MaxGap: 200 * time.Millisecond},
		Workload: func(ctx context.Context, ops *Ops) error {
			for ctx.Err() == nil {
				ops.Add("op")
				time.Sleep(10 * time.Millisecond)
			}
			workloadStopped = time.Now()
			return nil
		},
		Settled: func(context.Context) error {
			if polls++; polls < 3 {
				return errors.New("not yet")
			}
			return nil
		},
		SettleTimeout: 10 * time.Second,
		Check: func(context.Context) []Violation {
			if workloadStopped.IsZero() {
				t.Error("checked before the workload stopped")
			}
			return []Violation{{Invariant: "safety", Detail: "planted"}}
		},
	})
	if injected["ok"] != res.Faults["ok"] || injected["broken"] != res.Faults["broken"] || injected["ok"]+injected["broken"] == 0 {
		t.Errorf("injected %v, result says %v", injected, res.Faults)
	}
	if res.FaultErrors["broken"] != injected["broken"] || res.FaultErrors["ok"] != 0 {
		t.Errorf("fault errors %v; want every broken one", res.FaultErrors)
	}
	if !res.Settled || polls != 3 || res.Converged < time.Second {
		t.Errorf("settled %v after %d polls in %s; want after 3, about 1 s", res.Settled, polls, res.Converged)
	}
	if !res.Failed() || len(res.Violations) != 1 {
		t.Errorf("violations %v, failed %v", res.Violations, res.Failed())
	}
	table := res.Table()
	for _, want := range []string{"seed 3", SeedEnv + "=3", "ok", "broken", "VIOLATION safety: planted", "converged after the last fault"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	var violations []string
	for _, line := range strings.Split(table, "\n") {
		if strings.HasPrefix(line, "invariant violations") {
			violations = strings.Fields(line)
		}
	}
	if len(violations) != 3 || violations[2] != "1" {
		t.Errorf("table's violations line %q; want a count of 1:\n%s", violations, table)
	}
	if res.Ops["op"] == 0 {
		t.Errorf("ops %v", res.Ops)
	}
}

// Not settling is a liveness violation.
func TestRunNotSettled(t *testing.T) {
	res := Run(context.Background(), Config{
		Seed: 1, Duration: 100 * time.Millisecond,
		Workload:      func(ctx context.Context, _ *Ops) error { <-ctx.Done(); return nil },
		Settled:       func(context.Context) error { return errors.New("backup b-1 still there") },
		SettleTimeout: time.Second,
		Check:         func(context.Context) []Violation { return nil },
	})
	if res.Settled || len(res.Violations) != 1 || res.Violations[0].Invariant != "liveness" || !strings.Contains(res.Violations[0].Detail, "b-1") {
		t.Errorf("settled %v, violations %v; want one liveness violation naming b-1", res.Settled, res.Violations)
	}
}
