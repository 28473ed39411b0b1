package subreconcile_test

import (
	"encoding/json"
	"testing"

	"github.com/groundskeeper-io/groundskeeper/subreconcile"
)

func TestGenerations(t *testing.T) {
	type step func(g *subreconcile.Generations)
	for _, tt := range []struct {
		name           string
		start          subreconcile.Generations
		do             step
		generation     int64
		wantReconciled bool
		wantPending    bool
		want           subreconcile.Generations
	}{
		{
			name:       "new resource: generation 1 not reconciled",
			do:         func(*subreconcile.Generations) {},
			generation: 1,
			want:       subreconcile.Generations{},
		},
		{
			name:           "marked reconciled at the current generation",
			do:             func(g *subreconcile.Generations) { g.MarkReconciled(3) },
			generation:     3,
			wantReconciled: true,
			want:           subreconcile.Generations{Reconciled: 3},
		},
		{
			name:       "spec changed after reconciliation: generation 4 not reconciled at 3",
			start:      subreconcile.Generations{Reconciled: 3},
			do:         func(*subreconcile.Generations) {},
			generation: 4,
			want:       subreconcile.Generations{Reconciled: 3},
		},
		{
			name:           "a stale loop never moves reconciled backwards",
			start:          subreconcile.Generations{Reconciled: 5},
			do:             func(g *subreconcile.Generations) { g.MarkReconciled(4) },
			generation:     5,
			wantReconciled: true,
			want:           subreconcile.Generations{Reconciled: 5},
		},
		{
			name:           "exception: reconciled while pods are still terminating",
			start:          subreconcile.Generations{Reconciled: 2},
			do:             func(g *subreconcile.Generations) { g.MarkReconciledWithPendingRemoval(3) },
			generation:     3,
			wantReconciled: true,
			wantPending:    true,
			want:           subreconcile.Generations{Reconciled: 3, HasPendingRemoval: 3},
		},
		{
			name:           "exception cleared once the removal finished",
			start:          subreconcile.Generations{Reconciled: 3, HasPendingRemoval: 3},
			do:             func(g *subreconcile.Generations) { g.ClearPendingRemoval() },
			generation:     3,
			wantReconciled: true,
			want:           subreconcile.Generations{Reconciled: 3},
		},
		{
			name:           "user changes the resource while a removal is pending: new generation reconciled, removal still pending",
			start:          subreconcile.Generations{Reconciled: 3, HasPendingRemoval: 3},
			do:             func(g *subreconcile.Generations) { g.MarkReconciledWithPendingRemoval(4) },
			generation:     4,
			wantReconciled: true,
			wantPending:    true,
			want:           subreconcile.Generations{Reconciled: 4, HasPendingRemoval: 4},
		},
		{
			name:           "full reconciliation clears a pending removal",
			start:          subreconcile.Generations{Reconciled: 3, HasPendingRemoval: 3},
			do:             func(g *subreconcile.Generations) { g.MarkReconciled(3) },
			generation:     3,
			wantReconciled: true,
			want:           subreconcile.Generations{Reconciled: 3},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := tt.start
			tt.do(&g)
			if g != tt.want {
				t.Errorf("generations = %+v, want %+v", g, tt.want)
			}
			if got := g.IsReconciled(tt.generation); got != tt.wantReconciled {
				t.Errorf("IsReconciled(%d) = %v, want %v", tt.generation, got, tt.wantReconciled)
			}
			if got := g.PendingRemoval(); got != tt.wantPending {
				t.Errorf("PendingRemoval() = %v, want %v", got, tt.wantPending)
			}
		})
	}
}

func TestGenerationsJSON(t *testing.T) {
	b, err := json.Marshal(subreconcile.Generations{Reconciled: 7, HasPendingRemoval: 7})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"reconciled":7,"hasPendingRemoval":7}`; got != want {
		t.Errorf("JSON = %s, want %s", got, want)
	}
	b, _ = json.Marshal(subreconcile.Generations{})
	if string(b) != `{}` {
		t.Errorf("zero JSON = %s, want {}", b)
	}
}

func TestGenerationsDeepCopy(t *testing.T) {
	g := &subreconcile.Generations{Reconciled: 2, HasPendingRemoval: 2}
	c := g.DeepCopy()
	c.ClearPendingRemoval()
	if !g.PendingRemoval() {
		t.Error("DeepCopy shares state with the original")
	}
	var nilG *subreconcile.Generations
	if nilG.DeepCopy() != nil {
		t.Error("nil DeepCopy != nil")
	}
	if s := g.String(); s != "reconciled=2 hasPendingRemoval=2" {
		t.Errorf("String() = %q", s)
	}
}
