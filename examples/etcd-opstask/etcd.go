package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Etcd is what the task executors need from one etcd cluster. etcdCluster
// implements it with the etcd v3 client; the scenario has a simulated one.
type Etcd interface {
	// Health asks every member for its status.
	Health(ctx context.Context) Health
	// Revision returns the cluster's current revision.
	Revision(ctx context.Context) (int64, error)
	// Snapshot streams a snapshot of the backend database to w: etcd's
	// snapshot format, a bbolt file followed by its SHA-256.
	Snapshot(ctx context.Context, w io.Writer) (int64, error)
	// Events calls fn for every key change from revision from to rev, the
	// current revision when Events is called, and returns rev. It fails with
	// an error wrapping rpctypes.ErrCompacted when from is compacted away.
	Events(ctx context.Context, from int64, fn func(Event) error) (rev int64, err error)
	// Compact compacts the key space at the current revision and returns it.
	Compact(ctx context.Context) (int64, error)
	// Defragment defragments each member in turn, reporting each.
	Defragment(ctx context.Context, report func(Defragmented) error) error
}

// Health is what the members answered.
type Health struct {
	Members   int      // configured members
	Answering []string // members that answered
	Leader    bool     // a member knows a leader
	Errors    []string // why the others did not answer
}

// Quorum reports whether a majority of the members answer and a leader is
// known.
func (h Health) Quorum() bool { return h.Leader && len(h.Answering) > h.Members/2 }

// Event is one key change of a delta snapshot, stored one JSON object a line.
type Event struct {
	Type        string `json:"type"` // PUT or DELETE
	Key         []byte `json:"key"`
	Value       []byte `json:"value,omitempty"`
	ModRevision int64  `json:"modRevision"`
}

// Defragmented is one member's defragmentation.
type Defragmented struct {
	Member        string
	Before, After int64 // database size in bytes
}

// etcdCluster is a real etcd cluster behind its client URLs.
type etcdCluster struct {
	endpoints []string
	client    *clientv3.Client
}

// probeTimeout bounds one member's status request.
const probeTimeout = 3 * time.Second

func newEtcdCluster(endpoints []string) (*etcdCluster, error) {
	// No DialTimeout: the client connects lazily, so a cluster that is down
	// when the controller starts is reported by its tasks' preconditions.
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints})
	if err != nil {
		return nil, fmt.Errorf("etcd client for %v: %w", endpoints, err)
	}
	return &etcdCluster{endpoints: endpoints, client: c}, nil
}

func (e *etcdCluster) Close() error { return e.client.Close() }

func (e *etcdCluster) Health(ctx context.Context) Health {
	h := Health{Members: len(e.endpoints)}
	for _, ep := range e.endpoints {
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		st, err := e.client.Status(pctx, ep)
		cancel()
		if err != nil {
			h.Errors = append(h.Errors, fmt.Sprintf("%s: %v", ep, err))
			continue
		}
		h.Answering = append(h.Answering, ep)
		h.Leader = h.Leader || st.Leader != 0
	}
	return h
}

func (e *etcdCluster) Revision(ctx context.Context) (int64, error) {
	resp, err := e.client.Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("etcd revision: %w", err)
	}
	return resp.Header.Revision, nil
}

func (e *etcdCluster) Snapshot(ctx context.Context, w io.Writer) (int64, error) {
	rc, err := e.client.Snapshot(ctx)
	if err != nil {
		return 0, fmt.Errorf("etcd snapshot: %w", err)
	}
	defer rc.Close()
	n, err := io.Copy(w, rc)
	if err != nil {
		return n, fmt.Errorf("etcd snapshot after %d bytes: %w", n, err)
	}
	return n, nil
}

func (e *etcdCluster) Events(ctx context.Context, from int64, fn func(Event) error) (int64, error) {
	rev, err := e.Revision(ctx)
	if err != nil || from > rev {
		return rev, err
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	// An empty key with WithPrefix watches the whole key space.
	for resp := range e.client.Watch(wctx, "", clientv3.WithPrefix(), clientv3.WithRev(from)) {
		if err := resp.Err(); err != nil {
			if resp.CompactRevision != 0 {
				return rev, fmt.Errorf("etcd events from revision %d: %w (compacted at %d)", from, rpctypes.ErrCompacted, resp.CompactRevision)
			}
			return rev, fmt.Errorf("etcd events from revision %d: %w", from, err)
		}
		// A revision's events come in one response (no fragmenting): all
		// of them are delivered, up to and including rev.
		reached := false
		for _, ev := range resp.Events {
			if ev.Kv.ModRevision > rev {
				break
			}
			typ := "PUT"
			if ev.Type == mvccpb.DELETE {
				typ = "DELETE"
			}
			if err := fn(Event{Type: typ, Key: ev.Kv.Key, Value: ev.Kv.Value, ModRevision: ev.Kv.ModRevision}); err != nil {
				return rev, err
			}
			reached = reached || ev.Kv.ModRevision == rev
		}
		if reached || (len(resp.Events) > 0 && resp.Events[len(resp.Events)-1].Kv.ModRevision > rev) {
			return rev, nil
		}
	}
	if err := ctx.Err(); err != nil {
		return rev, err
	}
	return rev, errors.New("etcd watch closed before reaching the current revision")
}

func (e *etcdCluster) Compact(ctx context.Context) (int64, error) {
	rev, err := e.Revision(ctx)
	if err != nil {
		return 0, err
	}
	_, err = e.client.Compact(ctx, rev, clientv3.WithCompactPhysical())
	if errors.Is(err, rpctypes.ErrCompacted) {
		return rev, nil // nothing was written since the last compaction
	}
	if err != nil {
		return 0, fmt.Errorf("etcd compact at revision %d: %w", rev, err)
	}
	return rev, nil
}

func (e *etcdCluster) Defragment(ctx context.Context, report func(Defragmented) error) error {
	for _, ep := range e.endpoints {
		before, err := e.client.Status(ctx, ep)
		if err != nil {
			return fmt.Errorf("etcd member %s status: %w", ep, err)
		}
		if _, err := e.client.Defragment(ctx, ep); err != nil {
			return fmt.Errorf("etcd member %s defragment: %w", ep, err)
		}
		after, err := e.client.Status(ctx, ep)
		if err != nil {
			return fmt.Errorf("etcd member %s status: %w", ep, err)
		}
		if err := report(Defragmented{Member: ep, Before: before.DbSize, After: after.DbSize}); err != nil {
			return err
		}
	}
	return nil
}
