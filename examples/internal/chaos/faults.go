package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/groundskeeper-io/groundskeeper/testenv"
	"github.com/groundskeeper-io/groundskeeper/testenv/faultproxy"
)

// Sleep waits for d or until ctx ends, whichever is first.
func Sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Restart is a fault that restarts c on the same ports and data. A step
// whose Param is below 300 kills it first (a crash, not an orderly stop).
// A start that fails is tried three more times, 2 s apart.
func Restart(kind string, c *testenv.Component) Fault {
	return Fault{Kind: kind, Inject: func(ctx context.Context, s Step) error {
		ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
		if s.Param < 300 {
			if err := c.Kill(); err != nil && !errors.Is(err, testenv.ErrNotRunning) {
				return err
			}
		}
		err := c.Restart(ctx)
		for i := 0; err != nil && i < 3; i++ {
			time.Sleep(2 * time.Second)
			err = c.Start(ctx)
		}
		return err
	}}
}

// RestartGracefully is Restart without the kill: the component is always
// stopped with SIGTERM, for a store whose state a kill can lose (Azurite
// saves its metadata database only every few seconds and on shutdown).
func RestartGracefully(kind string, c *testenv.Component) Fault {
	return Fault{Kind: kind, Inject: func(ctx context.Context, s Step) error {
		ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
		err := c.Restart(ctx)
		for i := 0; err != nil && i < 3; i++ {
			time.Sleep(2 * time.Second)
			err = c.Start(ctx)
		}
		return err
	}}
}

// ControlPlaneFaults are restarts of k's etcd, kube-apiserver and
// kube-controller-manager.
func ControlPlaneFaults(k *testenv.IsolatedKubernetes) []Fault {
	return []Fault{
		Restart("restart etcd", k.Etcd),
		Restart("restart kube-apiserver", k.APIServer),
		Restart("restart kube-controller-manager", k.ControllerManager),
	}
}

// ConnectionFaults are faults of connections through proxies:
//
//   - "blackhole a client": clients[Target] passes nothing for Hold;
//   - "one-way partition": clients[Target] drops the bytes of one
//     direction (requests when Param is even, replies when odd) for Hold,
//     then resets the connections that lost bytes;
//   - "reset connections": every connection through all[Target] is reset;
//   - "add latency": all[Target] delays both directions by 20 to 270 ms
//     (from Param) for Hold.
//
// clients are the connections of the system under test (replicas, their
// store); all adds the ones between components (kube-apiserver to etcd).
func ConnectionFaults(clients, all []*faultproxy.Proxy) []Fault {
	return []Fault{
		{Kind: "blackhole a client", Weight: 2, Targets: len(clients), Lasts: true, Inject: func(ctx context.Context, s Step) error {
			clients[s.Target].SetBlackhole(true)
			defer clients[s.Target].SetBlackhole(false)
			return Sleep(ctx, s.Hold)
		}},
		{Kind: "one-way partition", Targets: len(clients), Lasts: true, Inject: func(ctx context.Context, s Step) error {
			dir := faultproxy.ToServer
			if s.Param%2 == 1 {
				dir = faultproxy.ToClient
			}
			clients[s.Target].SetDrop(dir, true)
			defer clients[s.Target].SetDrop(dir, false)
			return Sleep(ctx, s.Hold)
		}},
		{Kind: "reset connections", Weight: 2, Targets: len(all), Inject: func(ctx context.Context, s Step) error {
			all[s.Target].Reset()
			return nil
		}},
		{Kind: "add latency", Targets: len(all), Lasts: true, Inject: func(ctx context.Context, s Step) error {
			all[s.Target].SetLatency(faultproxy.Both, time.Duration(20+s.Param/4)*time.Millisecond)
			defer all[s.Target].SetLatency(faultproxy.Both, 0)
			return Sleep(ctx, s.Hold)
		}},
	}
}

// NodeStops is the fault "node stops answering": the kubelet (KWOK) of
// node Target is killed, and started again after 12 to 18 s (from Param,
// not the schedule's Hold). The node-lifecycle controller marks the node
// NotReady (Unknown) and its pods not ready after
// testenv.NodeMonitorGracePeriod; meanwhile its pods stay in the API,
// Running or, deleted, Terminating past their grace period, as pods that
// may still run; once it answers again its deleted pods go. The node comes
// back before the taint-eviction controller would evict its pods
// (testenv.DefaultTolerationSeconds later): the workloads' ground truth
// knows only of the pods they delete themselves.
func NodeStops(nodes *testenv.Nodes) Fault {
	return Fault{Kind: "node stops answering", Targets: len(nodes.Items), Inject: func(ctx context.Context, s Step) error {
		kubelet := nodes.Items[s.Target].Kubelet
		if err := kubelet.Kill(); err != nil && !errors.Is(err, testenv.ErrNotRunning) {
			return err
		}
		_ = Sleep(ctx, time.Duration(12000+s.Param*6)*time.Millisecond)
		sctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		err := kubelet.Start(sctx)
		for i := 0; err != nil && i < 3; i++ {
			time.Sleep(2 * time.Second)
			err = kubelet.Start(sctx)
		}
		return err
	}}
}

// KillReplica is the fault "kill a replica": r.Kill(Target), after which
// its slot starts a new replica.
func KillReplica(r *Replicas) Fault {
	return Fault{Kind: "kill a replica", Weight: 2, Targets: r.N, Inject: func(ctx context.Context, s Step) error {
		return r.Kill(s.Target)
	}}
}

// Retry runs op until it succeeds or a minute passes; each attempt gets
// 10 s. A workload or checker reads and writes ground truth with it
// through faults. op must be idempotent, or tell by its error that an
// earlier attempt was applied.
func Retry(op func(ctx context.Context) error) error {
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := op(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after a minute of retries: %w", err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}
