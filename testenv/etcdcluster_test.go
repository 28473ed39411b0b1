package testenv_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// A 3-member cluster keeps its data with one member killed, loses quorum
// with two, and gets it back when one is started again with its data. A
// member whose data directory was removed joins again as a new member
// once the cluster removed the old one and added it back.
func TestEtcdClusterKillWipeRestart(t *testing.T) {
	c := testenv.StartEtcdCluster(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Put(ctx, "k", "v1"); err != nil {
		t.Fatalf("put on a healthy cluster: %v", err)
	}

	m0, m1, m2 := c.Members[0], c.Members[1], c.Members[2]
	if err := m1.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// A put may time out while a new leader is elected; with quorum it
	// succeeds within a few tries.
	for attempt := 1; ; attempt++ {
		actx, cancelAttempt := context.WithTimeout(ctx, 5*time.Second)
		_, err := cli.Put(actx, "k", "v2")
		cancelAttempt()
		if err == nil {
			break
		}
		if attempt == 5 {
			t.Fatalf("put with one member of three down: %v", err)
		}
	}
	if err := m2.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(ctx, 3*time.Second)
	_, err = cli.Put(short, "k", "v3")
	cancelShort()
	if err == nil {
		t.Fatal("put with two members of three down succeeded; want no quorum")
	}
	if err := m1.Process.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m0.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	// The put that timed out was proposed: it may be applied now.
	got, err := cli.Get(ctx, "k")
	if err != nil || len(got.Kvs) != 1 || (string(got.Kvs[0].Value) != "v2" && string(got.Kvs[0].Value) != "v3") {
		t.Fatalf("after quorum came back: %v, %v; want k=v2 or v3", got, err)
	}
	want := string(got.Kvs[0].Value)

	// m2 lost its volume: remove it from the cluster, add it back, and
	// start it empty; it catches up from the others.
	if err := m2.RemoveData(); err != nil {
		t.Fatal(err)
	}
	members, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members.Members {
		if m.Name == m2.Name {
			if _, err := cli.MemberRemove(ctx, m.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	// etcd refuses a member change until the members it counts on were
	// connected for a few seconds (--strict-reconfig-check).
	for {
		_, err := cli.MemberAdd(ctx, []string{m2.PeerURL})
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("member add: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err := m2.Configure(c.InitialCluster(), "existing"); err != nil {
		t.Fatal(err)
	}
	if err := m2.Process.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m2.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	one, err := clientv3.New(clientv3.Config{Endpoints: []string{m2.ClientURL}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	got, err = one.Get(ctx, "k") // linearizable: through the leader, served by m2
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != want {
		t.Fatalf("the re-added member reads %v, %v; want k=%s", got, err, want)
	}
	if err := m2.Configure(c.InitialCluster(), "existing"); err == nil {
		t.Error("Configure of a running member succeeded")
	}
	if err := m2.RemoveData(); err == nil {
		t.Error("RemoveData of a running member succeeded")
	}
	if err := m2.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := m2.Process.Kill(); !errors.Is(err, testenv.ErrNotRunning) {
		t.Errorf("Kill of a stopped member: %v, want ErrNotRunning", err)
	}
}
