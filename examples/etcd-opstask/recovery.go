// Recovery from a permanent loss of quorum, DEP-05's first use case, as
// etcd's disaster recovery does it by hand: stop the remaining members,
// restore one from the backups as a new one-member cluster, and add the
// others back one at a time, each with empty data. Every step is recorded
// in status.steps (opstask's Run.Step) and a controller that takes the task
// over goes on at the first unfinished one.

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/groundskeeper-io/groundskeeper/examples/etcd-opstask/api"
	"github.com/groundskeeper-io/groundskeeper/opstask"
)

// Members runs the members of one etcd cluster. A real operator implements
// it with the cluster's StatefulSet, as statefulSetMembers does: Stop
// scales it down, Wipe deletes the member's PersistentVolumeClaim, Restore
// hands the snapshot to the init container (etcd-backup-restore) that
// restores it into the member's empty volume, Start scales it up with the
// member's initial cluster and state in the pod template. The tests also
// run members as processes (processMembers in recovery_test.go).
// Every method must be idempotent: a recovery taken over calls them again.
type Members interface {
	// List returns the cluster's members, in order; the first is the one
	// a recovery restores.
	List() []Member
	// Stop stops the member and waits until it is gone; a stopped member
	// is no error.
	Stop(ctx context.Context, name string) error
	// Wipe deletes the member's data (its volume); the member is stopped.
	Wipe(ctx context.Context, name string) error
	// Restore writes the etcd snapshot file into the member's empty data,
	// as the only member of a new cluster.
	Restore(ctx context.Context, name, snapshotPath string) error
	// Start starts the member with initialCluster (name=peerURL,...) and
	// state "new" or "existing", without waiting for it to be healthy.
	Start(ctx context.Context, name, initialCluster, state string) error
}

// Member is one member of a cluster.
type Member struct {
	Name, PeerURL, ClientURL string
}

// recoveryTimeout bounds a recovery, from its start, the wait for its
// approval included.
const recoveryTimeout = 24 * time.Hour

// Error codes of the recovery.
const (
	codeDataLoss      opstask.ErrorCode = "DataLossNotAllowed"
	codeNoMembers     opstask.ErrorCode = "MembersNotManaged"
	codeMembersReturn opstask.ErrorCode = "MembersCameBack"
)

// recoveryPlan is what the plan step decided, recorded as its result: a
// resumed recovery restores exactly this.
type recoveryPlan struct {
	Full     string   `json:"full"`
	Deltas   []string `json:"deltas,omitempty"`
	Revision int64    `json:"revision"`
	// Survivor is the highest revision a member answered with; 0 when
	// none answered.
	Survivor int64 `json:"survivor,omitempty"`
	// Silent are the members that did not answer: their data could not be
	// compared with the recovery point (the check before the stop asks
	// them again).
	Silent []string `json:"silent,omitempty"`
}

func (p recoveryPlan) String() string {
	s := fmt.Sprintf("recovery point: revision %d, from %s", p.Revision, p.Full)
	if len(p.Deltas) > 0 {
		s += fmt.Sprintf(" and %d delta snapshots up to %s", len(p.Deltas), p.Deltas[len(p.Deltas)-1])
	}
	switch {
	case p.Survivor > p.Revision:
		s += fmt.Sprintf("; a surviving member has revision %d: revisions %d-%d are LOST", p.Survivor, p.Revision+1, p.Survivor)
	case p.Survivor > 0:
		s += fmt.Sprintf("; no member that answered is newer (highest revision %d)", p.Survivor)
	}
	if len(p.Silent) > 0 {
		s += fmt.Sprintf("; %s did not answer: asked again before anything is stopped, when a member that does not answer, or is newer than the recovery point, refuses the recovery unless allowDataLoss is set (then writes it holds after the last backup, if any, are lost)",
			strings.Join(p.Silent, ", "))
	}
	return s
}

func (o *operator) recover(ctx context.Context, run *opstask.Run) error {
	cfg, err := opstask.DecodeConfig[api.RecoverFromQuorumLossConfig](run.Task, "recoverFromQuorumLoss")
	if err != nil {
		return err
	}
	name := run.Task.Spec.Target
	t := o.targets[name]
	if t.Members == nil {
		return opstask.WithCode(codeNoMembers, fmt.Errorf("etcd %s: this operator does not run its members (no Members configured), so it cannot recover it", name))
	}
	members := t.Members.List()
	raw, err := run.Step(ctx, "plan", func(ctx context.Context) (string, string, error) {
		p, err := o.planRecovery(ctx, name, t, members, cfg.AllowDataLoss)
		if err != nil {
			return "", "", err
		}
		b, err := json.Marshal(p)
		return p.String(), string(b), err
	})
	if err != nil {
		return err
	}
	var plan recoveryPlan
	if err := json.Unmarshal([]byte(raw), &plan); err != nil {
		return fmt.Errorf("step plan: result %q: %w", raw, err)
	}
	if err := run.Progress(ctx, plan.String()); err != nil {
		return err
	}
	if !cfg.SkipApproval {
		if err := run.Approval(ctx, "approve", fmt.Sprintf("recover etcd %s: stop its %d members, restore %s into %s, add the others back empty; %s", name, len(members), plan.Full, members[0].Name, plan)); err != nil {
			return err
		}
	}
	// The plan's data-loss check again, before anything is stopped: the
	// plan was made before the approval, maybe hours ago, and a member
	// that did not answer then (a partition) may answer now with writes
	// the backups do not have. A step of its own, so that its answers are
	// recorded: a stop step taken over finds the members it stopped silent.
	raw, err = run.Step(ctx, "check members", func(ctx context.Context) (string, string, error) {
		if err := checkNoQuorum(ctx, name, t); err != nil {
			return "", "", err
		}
		answers, err := askMembers(ctx, members)
		if err != nil {
			return "", "", err
		}
		if err := checkDataLoss(name, "before stopping any member", answers, plan.Revision, cfg.AllowDataLoss, nil); err != nil {
			return "", "", err
		}
		checked := map[string]int64{}
		for _, a := range answers {
			if a.Err == nil {
				checked[a.Name] = a.Revision
			}
		}
		b, err := json.Marshal(checked)
		return describeAnswers(answers), string(b), err
	})
	if err != nil {
		return err
	}
	var checked map[string]int64
	if err := json.Unmarshal([]byte(raw), &checked); err != nil {
		return fmt.Errorf("step check members: result %q: %w", raw, err)
	}
	_, err = run.Step(ctx, "stop", func(ctx context.Context) (string, string, error) {
		// The last check before the first irreversible act: members that
		// came back stop the recovery, and so does one newer than the
		// recovery point. A member silent now that answered at the check
		// may have been stopped by an earlier attempt of this step; it
		// had at most the recovery point then, and without quorum no
		// member's revision grows.
		if err := checkNoQuorum(ctx, name, t); err != nil {
			return "", "", err
		}
		answers, err := askMembers(ctx, members)
		if err != nil {
			return "", "", err
		}
		if err := checkDataLoss(name, "at the stop", answers, plan.Revision, cfg.AllowDataLoss, checked); err != nil {
			return "", "", err
		}
		for _, m := range members {
			if err := t.Members.Stop(ctx, m.Name); err != nil {
				return "", "", fmt.Errorf("stop %s: %w", m.Name, err)
			}
		}
		return fmt.Sprintf("stopped %d members", len(members)), "", nil
	})
	if err != nil {
		return err
	}
	first := members[0]
	_, err = run.Step(ctx, "restore", func(ctx context.Context) (string, string, error) {
		return o.restoreFirst(ctx, name, t, first, plan)
	})
	if err != nil {
		return err
	}
	cluster := first.Name + "=" + first.PeerURL
	_, err = run.Step(ctx, "start "+first.Name, func(ctx context.Context) (string, string, error) {
		if err := t.Members.Start(ctx, first.Name, cluster, "new"); err != nil {
			return "", "", err
		}
		rev, err := waitMembers(ctx, first.ClientURL, 1)
		if err != nil {
			return "", "", err
		}
		if rev < plan.Revision {
			return "", "", fmt.Errorf("%s started at revision %d, want %d", first.Name, rev, plan.Revision)
		}
		return fmt.Sprintf("%s runs alone at revision %d", first.Name, rev), "", nil
	})
	if err != nil {
		return err
	}
	for i, m := range members[1:] {
		cluster += "," + m.Name + "=" + m.PeerURL
		_, err = run.Step(ctx, "add "+m.Name, func(ctx context.Context) (string, string, error) {
			return o.addMember(ctx, t, first, m, cluster, i+2)
		})
		if err != nil {
			return err
		}
	}
	if h := t.Etcd.Health(ctx); !h.Quorum() || len(h.Answering) < len(members) {
		return fmt.Errorf("etcd %s after the recovery: %s", name, describe(h))
	}
	return run.Progress(ctx, fmt.Sprintf("recovered etcd %s: %d members with quorum; %s", name, len(members), plan))
}

// planRecovery verifies the newest backup chain and asks every member for
// its revision: the recovery point is the chain's last revision, and a
// member that has more means data loss, refused unless allowed. Members
// that do not answer are named in the plan; the check before the stop
// asks them again.
func (o *operator) planRecovery(ctx context.Context, name string, t *Target, members []Member, allowDataLoss bool) (*recoveryPlan, error) {
	if t.Backups == nil {
		return nil, opstask.WithCode(codeNoBackups, fmt.Errorf("etcd %s has no backup store to recover from", name))
	}
	b, err := t.Backups(ctx)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	c, err := latestChain(ctx, b, name)
	if err != nil {
		return nil, err
	}
	p := &recoveryPlan{Full: c.Full.Key, Revision: c.Revision()}
	for _, d := range c.Deltas {
		p.Deltas = append(p.Deltas, d.Key)
	}
	answers, err := askMembers(ctx, members)
	if err != nil {
		return nil, err
	}
	for _, a := range answers {
		if a.Err != nil {
			p.Silent = append(p.Silent, a.Name)
			continue
		}
		p.Survivor = max(p.Survivor, a.Revision)
	}
	// A member that does not answer now may answer before the stop step,
	// which decides on what the members answer then: it is no reason to
	// refuse the plan (it is said in it, for the approval).
	if p.Survivor > p.Revision && !allowDataLoss {
		return nil, opstask.WithCode(codeDataLoss, fmt.Errorf("etcd %s: %s; set spec.config.recoverFromQuorumLoss.allowDataLoss to recover anyway, or take a snapshot of the surviving member first", name, p))
	}
	return p, nil
}

// memberAnswer is one member's revision, or why it did not answer.
type memberAnswer struct {
	Name     string
	Revision int64
	Err      error
}

// askMembers asks every member for its revision. The error is the
// context's only: a member that does not answer is an answer with Err.
func askMembers(ctx context.Context, members []Member) ([]memberAnswer, error) {
	out := make([]memberAnswer, 0, len(members))
	for _, m := range members {
		rev, err := memberRevision(ctx, m.ClientURL)
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		out = append(out, memberAnswer{Name: m.Name, Revision: rev, Err: err})
	}
	return out, nil
}

// checkNoQuorum fails with MembersCameBack when the cluster has quorum
// (members came back since the plan): there is nothing to recover.
func checkNoQuorum(ctx context.Context, name string, t *Target) error {
	if h := t.Etcd.Health(ctx); h.Quorum() {
		return opstask.WithCode(codeMembersReturn, fmt.Errorf("etcd %s has quorum again (%s): not recovering", name, describe(h)))
	}
	return nil
}

// checkDataLoss is the one rule of what a recovery to revision point may
// wipe, for the check before the stop and the stop itself: without
// allowDataLoss, no member newer than point, and no member that did not
// answer ("did not answer" is not "has no data"), unless checked (the
// answers of the check before the stop) holds its revision. It fails with
// DataLossNotAllowed naming the members and their revisions.
func checkDataLoss(name, when string, answers []memberAnswer, point int64, allowDataLoss bool, checked map[string]int64) error {
	if allowDataLoss {
		return nil
	}
	var why []string
	for _, a := range answers {
		switch rev, ok := checked[a.Name]; {
		case a.Err != nil && ok && rev <= point:
		case a.Err != nil:
			why = append(why, fmt.Sprintf("%s did not answer (%v), so its data cannot be compared with the recovery point %d", a.Name, a.Err, point))
		case a.Revision > point:
			lost := fmt.Sprintf("revisions %d-%d", point+1, a.Revision)
			if a.Revision == point+1 {
				lost = fmt.Sprintf("revision %d", a.Revision)
			}
			why = append(why, fmt.Sprintf("%s has revision %d, newer than the recovery point %d: %s would be LOST", a.Name, a.Revision, point, lost))
		}
	}
	if len(why) == 0 {
		return nil
	}
	return opstask.WithCode(codeDataLoss, fmt.Errorf("etcd %s, %s: %s; no member's data was wiped; set spec.config.recoverFromQuorumLoss.allowDataLoss to recover anyway, or take a snapshot of the newer member first",
		name, when, strings.Join(why, "; ")))
}

// describeAnswers says each member's revision, or that it did not answer.
func describeAnswers(answers []memberAnswer) string {
	var parts []string
	for _, a := range answers {
		if a.Err != nil {
			parts = append(parts, a.Name+" did not answer")
		} else {
			parts = append(parts, fmt.Sprintf("%s at revision %d", a.Name, a.Revision))
		}
	}
	return strings.Join(parts, ", ")
}

// restoreFirst compacts the planned chain into one snapshot and restores
// it into the first member's wiped data.
func (o *operator) restoreFirst(ctx context.Context, name string, t *Target, first Member, plan recoveryPlan) (string, string, error) {
	b, err := t.Backups(ctx)
	if err != nil {
		return "", "", err
	}
	defer b.Close()
	c, err := latestChain(ctx, b, name)
	if err != nil {
		return "", "", err
	}
	if c.Full.Key != plan.Full || c.Revision() != plan.Revision {
		return "", "", fmt.Errorf("the backups changed since the plan: newest chain %s, planned %s up to revision %d", c, plan.Full, plan.Revision)
	}
	dir, err := os.MkdirTemp("", "etcd-recovery-")
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(dir)
	compact := o.compact
	if compact == nil {
		compact = compactChain
	}
	snap, err := compact(ctx, b, c, dir)
	if err != nil {
		return "", "", err
	}
	if err := t.Members.Wipe(ctx, first.Name); err != nil {
		return "", "", fmt.Errorf("wipe %s: %w", first.Name, err)
	}
	if err := t.Members.Restore(ctx, first.Name, snap.Path); err != nil {
		return "", "", fmt.Errorf("restore %s: %w", first.Name, err)
	}
	return fmt.Sprintf("restored %s at revision %d (%d bytes, SHA-256 %s) into %s", c, snap.Revision, snap.Bytes, snap.SHA256[:16], first.Name), "", nil
}

// addMember adds m to the cluster led by first as a new member with empty
// data and waits until the cluster has want members, all healthy. Taken
// over, it finds m added already and starts it again.
func (o *operator) addMember(ctx context.Context, t *Target, first, m Member, cluster string, want int) (string, string, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{first.ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return "", "", err
	}
	defer cli.Close()
	// A taken-over addition may find m added and not started: the
	// cluster has no quorum then, and only first's own view answers.
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	list, err := cli.MemberList(ctx, clientv3.WithSerializable())
	if err != nil {
		return "", "", fmt.Errorf("member list: %w", err)
	}
	added := false
	for _, x := range list.Members {
		if len(x.PeerURLs) == 1 && x.PeerURLs[0] == m.PeerURL {
			added = true
		}
	}
	if err := t.Members.Stop(ctx, m.Name); err != nil {
		return "", "", err
	}
	if err := t.Members.Wipe(ctx, m.Name); err != nil {
		return "", "", err
	}
	if !added {
		// etcd refuses a member change until its members were connected
		// for a few seconds (strict reconfiguration check).
		for {
			_, err := cli.MemberAdd(ctx, []string{m.PeerURL})
			if err == nil {
				break
			}
			if !errors.Is(err, rpctypes.ErrUnhealthy) || ctx.Err() != nil {
				return "", "", fmt.Errorf("add %s: %w", m.Name, err)
			}
			select {
			case <-ctx.Done():
				return "", "", context.Cause(ctx)
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
	if err := t.Members.Start(ctx, m.Name, cluster, "existing"); err != nil {
		return "", "", err
	}
	if _, err := waitMembers(ctx, m.ClientURL, want); err != nil {
		return "", "", err
	}
	return fmt.Sprintf("%s joined with empty data; %d members", m.Name, want), "", nil
}

// memberRevision asks one member for its status, which it answers without
// quorum, and returns its revision.
func memberRevision(ctx context.Context, clientURL string) (int64, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{clientURL}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	sctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	st, err := cli.Status(sctx, clientURL)
	if err != nil {
		return 0, err
	}
	return st.Header.Revision, nil
}

// waitMembers waits (up to two minutes) until the member at clientURL
// knows a leader and the cluster lists want started members, and returns
// its revision.
func waitMembers(ctx context.Context, clientURL string, want int) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{clientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	var last error
	for {
		actx, cancelAttempt := context.WithTimeout(ctx, 5*time.Second)
		st, err := cli.Status(actx, clientURL)
		if err == nil && st.Leader != 0 {
			var list *clientv3.MemberListResponse
			if list, err = cli.MemberList(actx); err == nil {
				started := 0
				for _, m := range list.Members {
					if m.Name != "" {
						started++
					}
				}
				if started == want && len(list.Members) == want {
					cancelAttempt()
					return st.Header.Revision, nil
				}
				err = fmt.Errorf("%d of %d members started", started, len(list.Members))
			}
		}
		cancelAttempt()
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("member %s not healthy with %d members: %v (%w)", clientURL, want, last, context.Cause(ctx))
		case <-time.After(200 * time.Millisecond):
		}
	}
}
