package subreconcile

import "fmt"

// Generations records in a resource's status how far reconciliation has got,
// as the FoundationDB operator's status.generations does: each field holds the
// metadata.generation it was last set for. Embed it in a status as
//
//	Generations subreconcile.Generations `json:"generations,omitempty"`
//
// and give the runner a Config.Generations accessor. A rollout is complete when
// status.generations.reconciled equals metadata.generation.
//
// Only scalar fields: controller-gen's generated DeepCopy copies it by value.
type Generations struct {
	// Reconciled is the last generation the loop considered reconciled.
	Reconciled int64 `json:"reconciled,omitempty"`

	// HasPendingRemoval is the generation at which Reconciled was set while
	// removals were still in flight (see MarkReconciledWithPendingRemoval);
	// zero when none are.
	HasPendingRemoval int64 `json:"hasPendingRemoval,omitempty"`
}

// IsReconciled reports whether generation has been reconciled.
func (g Generations) IsReconciled(generation int64) bool {
	return g.Reconciled >= generation
}

// PendingRemoval reports whether removals are still in flight for a
// generation that is already marked reconciled.
func (g Generations) PendingRemoval() bool { return g.HasPendingRemoval != 0 }

// MarkReconciled records that generation is reconciled and nothing is pending.
// A step (typically a final UpdateStatus) calls it with Loop.Generation()
// when the live state matches the spec. It never moves Reconciled backwards.
func (g *Generations) MarkReconciled(generation int64) {
	if generation > g.Reconciled {
		g.Reconciled = generation
	}
	g.HasPendingRemoval = 0
}

// MarkReconciledWithPendingRemoval is the documented exception: the
// generation is marked reconciled although work is still in flight. The
// FoundationDB operator does this once processes are fully excluded and their
// pods are terminating: termination waits on the kubelet, which can take
// arbitrarily long, and users may go on changing the resource meanwhile. The
// step doing the removal keeps returning a delayed requeue until it is done,
// then calls ClearPendingRemoval.
func (g *Generations) MarkReconciledWithPendingRemoval(generation int64) {
	if generation > g.Reconciled {
		g.Reconciled = generation
	}
	g.HasPendingRemoval = generation
}

// ClearPendingRemoval records that the in-flight removals have finished.
func (g *Generations) ClearPendingRemoval() { g.HasPendingRemoval = 0 }

// String formats g for logs.
func (g Generations) String() string {
	if g.HasPendingRemoval != 0 {
		return fmt.Sprintf("reconciled=%d hasPendingRemoval=%d", g.Reconciled, g.HasPendingRemoval)
	}
	return fmt.Sprintf("reconciled=%d", g.Reconciled)
}

// DeepCopyInto copies g into out; it lets controller-gen generated code for
// a status that embeds Generations call it like any other API type.
func (g *Generations) DeepCopyInto(out *Generations) { *out = *g }

// DeepCopy returns a copy of g.
func (g *Generations) DeepCopy() *Generations {
	if g == nil {
		return nil
	}
	out := *g
	return &out
}
