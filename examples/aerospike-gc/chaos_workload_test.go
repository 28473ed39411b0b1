package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"gocloud.dev/blob"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/groundskeeper-io/groundskeeper/examples/aerospike-gc/api"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/chaos"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/kubecmd"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/replicatest"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/retention"
	"github.com/groundskeeper-io/groundskeeper/testenv/faultproxy"
)

// The aerospike-gc chaos workload: two replicas of the collector with
// leader election, a generator of backups (with data in the store), of
// claims whose pods come and go (and come back through lifecycle's
// CheckReuse, as an operator brings a pod back), and of pods the operator
// did not make ("inspect-data" pods) that mount a claim for a while, and
// the ground truth the generator records, outside the system under test,
// for the checker.

// reuseUserAgent is the user agent of the generator's CheckReuse calls: the
// checker tells their claim deletions apart in the API server's audit log.
const reuseUserAgent = "aerospike-gc-chaos/reuse-check"

// gcWorld is where the workload runs.
type gcWorld struct {
	direct *rest.Config // the test's own: no faults
	ns     string
	bucket string       // its name
	store  *blob.Bucket // opened directly: no faults
	// auditLog is the API server's audit log of delete requests, "" when
	// it has none.
	auditLog string
	// replicaConfig is the API server config of replica slot i, and the
	// proxy it goes through (nil: no faults on it).
	replicaConfig func(i int) (*rest.Config, *faultproxy.Proxy)
	// storageClass, when set, is the class of the claims: a volume pool's
	// (testenv.Kubernetes.NewVolumePool), on nodes, where pods run and a
	// deleted pod terminates for podGrace seconds, or for as long as its
	// node does not answer, its claim mounted.
	storageClass string
	podGrace     int64
}

// gcOptions tune the workload; the zero value is the real thing.
type gcOptions struct {
	// clock is the collectors' clock: the real one, or a planted bug.
	clock clock.WithTicker
	// bound is the liveness bound: how long after its expiry, or after the
	// faults stopped if later, an expired object may still exist.
	bound time.Duration
	// process, when set, runs the replicas as processes of the example's
	// binary (as main wires it), which a kill ends with SIGKILL.
	process *chaos.Process
	log     logr.Logger
	// mountRace is how long a pod must have existed before a claim's
	// deletion request for the checker to report the deletion as made
	// while the pod mounted the claim (chaos.MountLog.Covering): the
	// longest a replica's request can be held on its way by a fault. The
	// generator's own CheckReuse deletions are judged with no such bound
	// (see check).
	mountRace time.Duration
	// reuseClient, when set, wraps the lifecycle client of the generator's
	// CheckReuse calls: a planted bug.
	reuseClient func(lifecycle.Client) lifecycle.Client
}

// Backup classes, which say what may happen to a backup.
const (
	classExpires = "expires"   // short TTL, Secret present: collected
	classNoCreds = "no-secret" // short TTL, Secret absent: kept, data and all
	classLong    = "1h"        // kept through the run
	classForever = "forever"   // spec.ttl 0d
)

type backupTruth struct {
	name, class string
	ttl         time.Duration
	uid         types.UID
	created     time.Time // creationTimestamp, when known
	keys        []string  // its data
	decoy       string    // a key beside its prefix: never to be deleted
	userDeleted time.Time // when the generator deleted it: allowed
}

// expiry is when the backup may be collected; zero: never.
func (b *backupTruth) expiry() time.Time {
	if b.class != classExpires || b.created.IsZero() {
		return time.Time{}
	}
	return b.created.Add(b.ttl)
}

type mount struct {
	from time.Time // the pod's create returned
	to   time.Time // the pod's delete was sent; zero: still mounted
	toOK time.Time // the pod's delete returned
}

type claimTruth struct {
	name, pod string
	ttl       time.Duration
	uid       types.UID
	mounts    []mount
	comeback  time.Time // when the pod comes back; zero: it does not
	// remounted: the comeback is over (the pod came back, or CheckReuse
	// found the claim gone or deleted it).
	remounted bool
	// foreign are the mounts of pods the operator did not make.
	foreign []mount
	// cold: outside the collector's --claim-selector (app=aerospike-cold).
	// The generator marks it unmounted itself, and only CheckReuse may
	// delete it: nothing must collect it.
	cold bool
	// unmountAt is when the generator deletes a cold claim's pod.
	unmountAt time.Time
}

// foreignPod is a pod the operator did not make that mounts a claim for a
// while: someone inspecting the data, or a backup.
type foreignPod struct {
	name  string
	claim *claimTruth
	until time.Time // when the generator deletes it
	m     int       // its mount in claim.foreign
	gone  bool      // its delete was sent
}

// allowedAt says whether the claim may be deleted at t: it was unmounted
// for its TTL, counted from the second in which its pod's delete was sent
// (lifecycle records last-unmounted-on in seconds).
func (c *claimTruth) allowedAt(t time.Time) bool {
	if len(c.mounts) == 0 || c.mounts[0].to.IsZero() {
		return false
	}
	for _, m := range c.mounts {
		if !m.from.After(t) && (m.to.IsZero() || t.Before(m.to.Truncate(time.Second).Add(c.ttl))) {
			return false
		}
	}
	return !t.Before(c.mounts[0].to.Truncate(time.Second).Add(c.ttl))
}

// expiry is when the claim must be collected by (before the liveness
// bound): its last unmount's TTL later, a foreign pod's included; zero
// when it is mounted, comes back, has a TTL beyond the run, or is cold. A foreign
// pod that came and went before a collection pass removed the claim's
// mark leaves the earlier mark in force: the claim may go sooner, never
// later.
func (c *claimTruth) expiry() time.Time {
	if len(c.mounts) == 0 || c.ttl >= time.Hour || c.cold {
		return time.Time{}
	}
	last := c.mounts[len(c.mounts)-1]
	if last.to.IsZero() || (!c.comeback.IsZero() && !c.remounted) {
		return time.Time{}
	}
	end := last.toOK
	for _, f := range c.foreign {
		if f.toOK.IsZero() {
			return time.Time{}
		}
		if f.toOK.After(end) {
			end = f.toOK
		}
	}
	return end.Add(c.ttl + time.Second)
}

// mustKeep says whether the claim could never be deleted so far.
func (c *claimTruth) mustKeep(now time.Time) bool {
	// Allowed windows open at an unmount's TTL and close at the next
	// mount: try each opening.
	for _, m := range c.mounts {
		if !m.to.IsZero() {
			if at := m.to.Truncate(time.Second).Add(c.ttl); at.Before(now) && c.allowedAt(at) {
				return false
			}
		}
	}
	return true
}

// truth is what the generator did.
type truth struct {
	mu      sync.Mutex
	backups map[string]*backupTruth
	claims  map[string]*claimTruth
	order   []string // backup names in creation order
	corder  []string
	ncold   int // cold claims in corder
	foreign []*foreignPod
	stopped time.Time // when the workload stopped
}

type gcWorkload struct {
	w                       gcWorld
	o                       gcOptions
	seed                    uint64
	truth                   truth
	keys                    *chaos.KeyHistory
	backupAudit, claimAudit *chaos.DeleteAudit
	// mounts are the pods' mounts, the operator's and foreign ones.
	mounts chaos.MountLog
	cl     client.Client // direct
	kc     kubernetes.Interface
	// reuse is the lifecycle Manager of the generator's CheckReuse calls,
	// on a direct client of its own (user agent reuseUserAgent); marker
	// marks the cold claims unmounted.
	reuse, marker *lifecycle.Manager
	ann           lifecycle.Annotations
	replicas      *chaos.Replicas
	seen          map[string]int       // deletions by source, from check
	watchMissed   map[types.UID]string // in the audit log, not from the watch
	// uncertain holds the objects whose only recorded deletion is a
	// request cut short (chaos.DeleteRequest.Uncertain), from check.
	uncertain map[types.UID]bool
	// byReuse holds the claim deletions the audit log says the
	// generator's CheckReuse sent (its user agent), from check.
	byReuse map[reuseKey]bool
	prefix  string
	// coldPending are the cold claims whose pods were deleted and may
	// still terminate (on nodes): the generator's alone.
	coldPending []coldUnmount
}

// newGCWorkload starts the audits (before anything is created) and the key
// history, and creates the Secret the backups name.
func newGCWorkload(ctx context.Context, w gcWorld, o gcOptions, seed uint64, endpoint string) (*gcWorkload, error) {
	cl, err := client.New(w.direct, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	kc, err := kubernetes.NewForConfig(w.direct)
	if err != nil {
		return nil, err
	}
	g := &gcWorkload{w: w, o: o, seed: seed, cl: cl, kc: kc, prefix: "backups/" + w.ns + "/",
		truth: truth{backups: map[string]*backupTruth{}, claims: map[string]*claimTruth{}},
		ann:   lifecycle.Annotations{Prefix: lifecycle.AerospikeAnnotationPrefix}}
	// The generator's CheckReuse goes straight to the API server, with no
	// fault on its connection and no client-side rate limit to hold its
	// delete after its pod list.
	rc := rest.CopyConfig(w.direct)
	rc.UserAgent, rc.QPS, rc.Burst = reuseUserAgent, 1000, 1000
	rkc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	lc := lifecycle.ClientGo(rkc.CoreV1())
	if g.marker, err = lifecycle.New(lifecycle.Config{Client: lc, Annotations: g.ann}); err != nil {
		return nil, err
	}
	if o.reuseClient != nil {
		lc = o.reuseClient(lc)
	}
	if g.reuse, err = lifecycle.New(lifecycle.Config{Client: lc, Annotations: g.ann}); err != nil {
		return nil, err
	}
	if g.o.clock == nil {
		g.o.clock = clock.RealClock{}
	}
	g.replicas = &chaos.Replicas{N: 2, Config: w.replicaConfig, Run: g.runManager, Log: o.log}
	if o.process != nil {
		g.replicas.Run = o.process.Run
	}

	// The audits: informers on the test's own connection, whose relists
	// after an API server restart report the deletions their watch missed.
	factory := informers.NewSharedInformerFactoryWithOptions(kc, 0, informers.WithNamespace(w.ns))
	claimInf := factory.Core().V1().PersistentVolumeClaims().Informer()
	if g.claimAudit, err = chaos.AuditDeletes(claimInf); err != nil {
		return nil, err
	}
	// The audit's cache logs through controller-runtime's root logger.
	ctrllog.SetLogger(o.log)
	c, err := cache.New(w.direct, cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{w.ns: {}}})
	if err != nil {
		return nil, err
	}
	backupInf, err := c.GetInformer(ctx, &api.AerospikeNamespaceBackup{})
	if err != nil {
		return nil, err
	}
	if g.backupAudit, err = chaos.AuditDeletes(backupInf); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	go func() { _ = c.Start(ctx) }()
	if !toolscache.WaitForCacheSync(ctx.Done(), claimInf.HasSynced) || !c.WaitForCacheSync(ctx) {
		return nil, errors.New("audit informers did not sync")
	}
	g.keys = chaos.NewKeyHistory(w.store, g.prefix)
	go g.keys.Run(ctx, 500*time.Millisecond)
	if w.storageClass != "" {
		// On nodes a deleted pod mounts its claim until it is gone.
		go g.mounts.Track(ctx, kc.CoreV1().Pods(w.ns), 250*time.Millisecond)
	}

	_, err = kc.CoreV1().Secrets(w.ns).Create(ctx, s3Secret("minio", endpoint), metav1.CreateOptions{})
	return g, err
}

// generate creates, mounts, unmounts and deletes until ctx ends, then
// deletes the foreign pods left.
func (g *gcWorkload) generate(ctx context.Context, ops *chaos.Ops) (err error) {
	rng := rand.New(rand.NewPCG(g.seed, 0x616572))
	// The foreign pods draw from a stream of their own: the rest of the
	// workload is what it was without them.
	frng := rand.New(rand.NewPCG(g.seed, 0x696e73)) // "ins"
	// So do the cold claims.
	crng := rand.New(rand.NewPCG(g.seed, 0x636f6c)) // "col"
	defer func() {
		if e := g.unmountForeign(ops, true); err == nil {
			err = e
		}
		g.truth.mu.Lock()
		g.truth.stopped = time.Now()
		g.truth.mu.Unlock()
	}()
	// Some that must be kept from the start.
	for _, class := range []string{classForever, classLong, classNoCreds} {
		if err := g.newBackup(rng, class, ops); err != nil {
			return err
		}
	}
	for i := 0; ctx.Err() == nil; i++ {
		if err := g.remountDue(ops); err != nil {
			return err
		}
		if err := g.unmountForeign(ops, false); err != nil {
			return err
		}
		if frng.IntN(5) == 0 {
			if err := g.mountForeign(frng, ops); err != nil {
				return err
			}
		}
		if err := g.cold(crng, ops); err != nil {
			return err
		}
		var err error
		switch n := rng.IntN(10); {
		case n < 4:
			class := classExpires
			switch m := rng.IntN(20); {
			case m < 3:
				class = classNoCreds
			case m < 5:
				class = classLong
			case m < 7:
				class = classForever
			}
			err = g.newBackup(rng, class, ops)
		case n < 5:
			err = g.userDelete(rng, ops)
		case n < 7:
			err = g.newClaim(rng, ops)
		default:
			err = g.unmount(rng, frng, ops)
		}
		if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(200+rng.IntN(400)) * time.Millisecond):
		}
	}
	return nil
}

func (g *gcWorkload) newBackup(rng *rand.Rand, class string, ops *chaos.Ops) error {
	g.truth.mu.Lock()
	name := fmt.Sprintf("b-%d", len(g.truth.order))
	g.truth.mu.Unlock()
	b := &backupTruth{name: name, class: class, decoy: g.prefix + name + ".log"}
	ttl, secret := "", "minio"
	switch class {
	case classExpires, classNoCreds:
		b.ttl = time.Duration(3+rng.IntN(10)) * time.Second
		ttl = retention.Format(b.ttl)
		if class == classNoCreds {
			secret = "absent"
		}
	case classLong:
		b.ttl, ttl = time.Hour, "1h"
	case classForever:
		ttl = "0d"
	}
	for _, part := range []string{"part-0001.asb", "metadata.json"} {
		b.keys = append(b.keys, g.prefix+name+"/"+part)
	}
	// The data first, as a backup writes it; then the resource.
	for _, key := range append(slices.Clone(b.keys), b.decoy) {
		if err := chaos.Retry(func(ctx context.Context) error { return g.w.store.WriteAll(ctx, key, []byte("data of "+key), nil) }); err != nil {
			return fmt.Errorf("write %s: %w", key, err)
		}
		g.keys.Expect(key, time.Now())
		ops.Add("write object")
	}
	g.truth.mu.Lock()
	g.truth.backups[name] = b
	g.truth.order = append(g.truth.order, name)
	g.truth.mu.Unlock()
	obj := &api.AerospikeNamespaceBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: g.w.ns, Name: name},
		Spec: api.AerospikeNamespaceBackupSpec{
			Target:  api.TargetNamespace{Cluster: "orders", Namespace: "orders"},
			Storage: api.BackupStorageSpec{Type: "s3", Bucket: g.w.bucket, Secret: secret},
			TTL:     ttl,
		},
	}
	err := chaos.Retry(func(ctx context.Context) error {
		err := g.cl.Create(ctx, obj.DeepCopy())
		if apierrors.IsAlreadyExists(err) {
			return nil // an earlier attempt was applied
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("create backup %s: %w", name, err)
	}
	ops.Add("create backup (" + class + ")")
	// Learn its UID and creationTimestamp; if it is gone already (a
	// planted clock), the audit's last state tells.
	_ = chaos.Retry(func(ctx context.Context) error {
		var got api.AerospikeNamespaceBackup
		err := g.cl.Get(ctx, client.ObjectKey{Namespace: g.w.ns, Name: name}, &got)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil {
			g.truth.mu.Lock()
			b.uid, b.created = got.UID, got.CreationTimestamp.Time
			g.truth.mu.Unlock()
		}
		return err
	})
	return nil
}

// userDelete deletes a backup that is kept (1h or forever), as its owner
// may: its data stays in the store, and nothing may delete it.
func (g *gcWorkload) userDelete(rng *rand.Rand, ops *chaos.Ops) error {
	g.truth.mu.Lock()
	var cands []*backupTruth
	for _, name := range g.truth.order {
		b := g.truth.backups[name]
		if (b.class == classLong || b.class == classForever) && b.userDeleted.IsZero() && b.uid != "" {
			cands = append(cands, b)
		}
	}
	if len(cands) < 3 { // keep some
		g.truth.mu.Unlock()
		return nil
	}
	b := cands[rng.IntN(len(cands))]
	b.userDeleted = time.Now()
	uid := b.uid
	g.truth.mu.Unlock()
	err := chaos.Retry(func(ctx context.Context) error {
		obj := &api.AerospikeNamespaceBackup{ObjectMeta: metav1.ObjectMeta{Namespace: g.w.ns, Name: b.name}}
		err := g.cl.Delete(ctx, obj, client.Preconditions{UID: &uid})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("delete backup %s: %w", b.name, err)
	}
	ops.Add("delete backup (user)")
	return nil
}

func (g *gcWorkload) newClaim(rng *rand.Rand, ops *chaos.Ops) error {
	g.truth.mu.Lock()
	i := len(g.truth.corder) - g.truth.ncold
	c := &claimTruth{name: fmt.Sprintf("data-%d", i), pod: fmt.Sprintf("pod-%d", i),
		ttl: time.Duration(5+rng.IntN(6)) * time.Second}
	if rng.IntN(7) == 0 {
		c.ttl = time.Hour
	}
	g.truth.claims[c.name] = c
	g.truth.corder = append(g.truth.corder, c.name)
	g.truth.mu.Unlock()
	return g.createClaim(c, ops)
}

// createClaim creates claim c, labelled app=aerospike (app=aerospike-cold
// when cold) and tracked for pod c.pod with c's TTL, and mounts it.
func (g *gcWorkload) createClaim(c *claimTruth, ops *chaos.Ops) error {
	app := "aerospike"
	if c.cold {
		app = "aerospike-cold"
	}
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: c.name, Labels: map[string]string{"app": app}, Annotations: g.ann.Track(c.pod, c.ttl)},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: g.storageClass(),
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	var created *corev1.PersistentVolumeClaim
	err := chaos.Retry(func(ctx context.Context) error {
		got, err := g.kc.CoreV1().PersistentVolumeClaims(g.w.ns).Create(ctx, claim, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			got, err = g.kc.CoreV1().PersistentVolumeClaims(g.w.ns).Get(ctx, c.name, metav1.GetOptions{})
		}
		created = got
		return err
	})
	if err != nil {
		return fmt.Errorf("create claim %s: %w", c.name, err)
	}
	g.truth.mu.Lock()
	c.uid = created.UID
	g.truth.mu.Unlock()
	ops.Add("create claim")
	return g.mountPod(c, ops)
}

func (g *gcWorkload) mountPod(c *claimTruth, ops *chaos.Ops) error {
	app := "aerospike"
	if c.cold {
		app = "aerospike-cold"
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: c.pod, Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: g.podGrace(),
			Containers: []corev1.Container{{Name: "aerospike", Image: "aerospike/aerospike-server",
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/opt/aerospike/data"}}}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.name}}}},
		},
	}
	m, err := g.mounts.CreatePod(g.kc.CoreV1().Pods(g.w.ns), pod, c.name, false)
	if err != nil {
		return err
	}
	g.truth.mu.Lock()
	c.mounts = append(c.mounts, mount{from: m.From})
	g.truth.mu.Unlock()
	ops.Add("mount claim")
	return nil
}

// mountForeign creates a pod the operator did not make, labelled
// app=inspect-data, that mounts an existing claim for 2 to 8 s: two times
// in three a claim whose own pod is away (someone looks at the data of a
// stopped replica), else any claim. (unmount makes others.)
func (g *gcWorkload) mountForeign(rng *rand.Rand, ops *chaos.Ops) error {
	g.truth.mu.Lock()
	var away, all []*claimTruth
	for _, name := range g.truth.corder {
		c := g.truth.claims[name]
		if c.uid == "" || c.cold {
			continue
		}
		all = append(all, c)
		if n := len(c.mounts); n > 0 && !c.mounts[n-1].to.IsZero() {
			away = append(away, c)
		}
	}
	if len(away) > 0 && rng.IntN(3) < 2 {
		all = away
	}
	if len(all) == 0 {
		g.truth.mu.Unlock()
		return nil
	}
	c := all[rng.IntN(len(all))]
	g.truth.mu.Unlock()
	return g.inspect(c, time.Duration(2000+rng.IntN(6000))*time.Millisecond, ops)
}

// inspect creates an inspect-data pod that mounts claim c for lasts.
func (g *gcWorkload) inspect(c *claimTruth, lasts time.Duration, ops *chaos.Ops) error {
	g.truth.mu.Lock()
	f := &foreignPod{name: fmt.Sprintf("inspect-%s-%d", c.name, len(g.truth.foreign)), claim: c}
	g.truth.foreign = append(g.truth.foreign, f)
	g.truth.mu.Unlock()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: f.name, Labels: map[string]string{"app": "inspect-data"}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: g.podGrace(),
			Containers: []corev1.Container{{Name: "inspect", Image: "busybox", Command: []string{"sleep", "3600"},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data", ReadOnly: true}}}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.name, ReadOnly: true}}}},
		},
	}
	m, err := g.mounts.CreatePod(g.kc.CoreV1().Pods(g.w.ns), pod, c.name, true)
	if err != nil {
		return fmt.Errorf("foreign pod: %w", err)
	}
	g.truth.mu.Lock()
	c.foreign = append(c.foreign, mount{from: m.From})
	f.m, f.until = len(c.foreign)-1, m.From.Add(lasts)
	g.truth.mu.Unlock()
	ops.Add("foreign pod mounts a claim")
	return nil
}

// unmountForeign deletes the foreign pods whose time is up, or all of them.
func (g *gcWorkload) unmountForeign(ops *chaos.Ops, all bool) error {
	now := time.Now()
	g.truth.mu.Lock()
	var due []*foreignPod
	for _, f := range g.truth.foreign {
		if !f.gone && !f.until.IsZero() && (all || !now.Before(f.until)) {
			f.gone = true
			f.claim.foreign[f.m].to = now
			due = append(due, f)
		}
	}
	g.truth.mu.Unlock()
	for _, f := range due {
		if err := g.mounts.DeletePod(g.kc.CoreV1().Pods(g.w.ns), f.name, now); err != nil {
			return fmt.Errorf("foreign pod: %w", err)
		}
		g.truth.mu.Lock()
		f.claim.foreign[f.m].toOK = time.Now()
		g.truth.mu.Unlock()
		ops.Add("foreign pod deleted")
	}
	return nil
}

// unmount deletes the pod of a claim mounted for 4 s or more. Two in five
// come back within a quarter of the claim's TTL, as a restarted pod does.
// Of the others, two in three have their data inspected at once by a
// foreign pod that stays until 2 to 6 s past the claim's TTL.
func (g *gcWorkload) unmount(rng, frng *rand.Rand, ops *chaos.Ops) error {
	inspect := frng.IntN(3) < 2
	inspectFor := time.Duration(2000+frng.IntN(4000)) * time.Millisecond
	g.truth.mu.Lock()
	var cands []*claimTruth
	for _, name := range g.truth.corder {
		c := g.truth.claims[name]
		if n := len(c.mounts); !c.cold && n > 0 && c.mounts[n-1].to.IsZero() && time.Since(c.mounts[n-1].from) > 4*time.Second {
			cands = append(cands, c)
		}
	}
	if len(cands) == 0 {
		g.truth.mu.Unlock()
		return nil
	}
	c := cands[rng.IntN(len(cands))]
	last := &c.mounts[len(c.mounts)-1]
	last.to = time.Now()
	g.mounts.Unmounting(c.pod, last.to)
	comeback := !c.remounted && c.ttl < time.Hour && rng.IntN(5) < 2
	delay := time.Duration(500+rng.Int64N(int64(c.ttl/4/time.Millisecond))) * time.Millisecond
	g.truth.mu.Unlock()
	err := chaos.Retry(func(ctx context.Context) error {
		err := g.kc.CoreV1().Pods(g.w.ns).Delete(ctx, c.pod, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("delete pod %s: %w", c.pod, err)
	}
	g.truth.mu.Lock()
	last.toOK = time.Now()
	if comeback {
		c.comeback = last.toOK.Add(delay)
	}
	g.truth.mu.Unlock()
	ops.Add("unmount claim")
	if comeback || !inspect || c.ttl >= time.Hour {
		return nil
	}
	return g.inspect(c, c.ttl+inspectFor, ops)
}

// remountDue brings back the pods due to come back, as their operator
// would: lifecycle's CheckReuse first, then the pod when the verdict is
// Reuse (CheckReuse has removed the claim's mark, guarded by its
// resourceVersion, so a collector that decided on the marked version
// cannot delete it). Wait (the claim is terminating, or its mark had
// expired while a pod the operator did not make mounts it, and CheckReuse
// removed the mark) is asked again at the next step. Create (the claim is
// gone: the collector took it) and DeleteFirst (CheckReuse deleted it)
// end the comeback: an operator would create a fresh claim; the workload
// leaves the pod away.
func (g *gcWorkload) remountDue(ops *chaos.Ops) error {
	now := time.Now()
	g.truth.mu.Lock()
	var due []*claimTruth
	for _, name := range g.truth.corder {
		c := g.truth.claims[name]
		if !c.comeback.IsZero() && !c.remounted && !now.Before(c.comeback) {
			due = append(due, c)
		}
	}
	g.truth.mu.Unlock()
	for _, c := range due {
		// On nodes the earlier pod may still terminate: an operator (a
		// StatefulSet) waits until it is gone, and so does the generator,
		// at a later step.
		if gone, err := g.podGone(c.pod); err != nil || !gone {
			if err != nil {
				return err
			}
			continue
		}
		dec, err := g.checkReuse(c, ops)
		if err != nil {
			return err
		}
		if dec.Verdict == lifecycle.VerdictWait {
			continue
		}
		if dec.Verdict == lifecycle.VerdictReuse {
			if err := g.mountPod(c, ops); err != nil {
				return err
			}
			ops.Add("remount claim")
		}
		g.truth.mu.Lock()
		c.remounted = true
		if dec.Verdict != lifecycle.VerdictReuse {
			c.comeback = time.Time{}
		}
		g.truth.mu.Unlock()
	}
	return nil
}

// checkReuse calls lifecycle's CheckReuse for c's pod, as an operator does
// before it creates the pod, and counts the verdict: among all calls, and
// among the calls on a claim whose mark had expired (a read just before
// says) while a foreign pod mounts it, where a CheckReuse that decided on
// the mark alone would delete a mounted claim.
func (g *gcWorkload) checkReuse(c *claimTruth, ops *chaos.Ops) (lifecycle.ReuseDecision, error) {
	g.truth.mu.Lock()
	foreign := false
	for _, f := range g.truth.foreign {
		foreign = foreign || (f.claim == c && !f.gone)
	}
	g.truth.mu.Unlock()
	var dec lifecycle.ReuseDecision
	expired := false
	err := chaos.Retry(func(ctx context.Context) error {
		claim, err := g.kc.CoreV1().PersistentVolumeClaims(g.w.ns).Get(ctx, c.name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			expired = false
		case err != nil:
			return err
		default:
			u, err := g.ann.Read(claim)
			if err != nil {
				return err
			}
			exp := u.Expiry(0)
			expired = !exp.IsZero() && !time.Now().Before(exp)
		}
		dec, err = g.reuse.CheckReuse(ctx, lifecycle.PodClaim{Namespace: g.w.ns, Pod: c.pod, Claim: c.name}, nil)
		return err
	})
	if err != nil {
		return dec, fmt.Errorf("check reuse of claim %s for pod %s: %w", c.name, c.pod, err)
	}
	ops.Add("reuse check: " + dec.Verdict.String())
	if expired && foreign {
		ops.Add("reuse check, mark expired, a foreign pod mounts the claim: " + dec.Verdict.String())
	}
	return dec, nil
}

// cold creates, one step in four, a cold claim (outside the collector's
// --claim-selector) with a TTL of 4 to 6 s, whose pod is deleted 3 to 5 s
// later, and deletes the cold pods whose time is up. The generator marks a
// cold claim unmounted itself (lifecycle's MarkUnmounted, as an operator
// does after deleting its pod), and no collector removes a mark that goes
// stale: a cold claim keeps an expired mark while a pod mounts it. Of the
// cold claims unmounted, two in four are inspected at once by a foreign
// pod that stays until 5 to 8 s past the TTL, and their pod comes back
// within that stay, 1 to 2 s past the TTL, through CheckReuse: Wait, the
// stale mark removed, then Reuse; one in four comes back as late, with
// no pod on the claim (DeleteFirst: CheckReuse deletes it); one in four
// within a quarter of its TTL (Reuse).
func (g *gcWorkload) cold(rng *rand.Rand, ops *chaos.Ops) error {
	if err := g.markColdPending(ops); err != nil {
		return err
	}
	if rng.IntN(4) == 0 {
		g.truth.mu.Lock()
		i := g.truth.ncold
		c := &claimTruth{name: fmt.Sprintf("cold-%d", i), pod: fmt.Sprintf("cold-pod-%d", i), cold: true,
			ttl: time.Duration(4+rng.IntN(3)) * time.Second, unmountAt: time.Now().Add(time.Duration(3000+rng.IntN(2000)) * time.Millisecond)}
		g.truth.claims[c.name] = c
		g.truth.corder = append(g.truth.corder, c.name)
		g.truth.ncold++
		g.truth.mu.Unlock()
		if err := g.createClaim(c, ops); err != nil {
			return err
		}
	}
	now := time.Now()
	g.truth.mu.Lock()
	var due []*claimTruth
	for _, name := range g.truth.corder {
		c := g.truth.claims[name]
		if c.cold && len(c.mounts) == 1 && c.mounts[0].to.IsZero() && !now.Before(c.unmountAt) {
			due = append(due, c)
		}
	}
	g.truth.mu.Unlock()
	for _, c := range due {
		scenario := rng.IntN(4)
		early := time.Duration(500+rng.Int64N(int64(c.ttl/4/time.Millisecond))) * time.Millisecond
		late := c.ttl + time.Second + time.Duration(rng.IntN(1000))*time.Millisecond
		stay := c.ttl + time.Duration(5000+rng.IntN(3000))*time.Millisecond
		g.truth.mu.Lock()
		last := &c.mounts[0]
		last.to = time.Now()
		g.mounts.Unmounting(c.pod, last.to)
		g.truth.mu.Unlock()
		err := chaos.Retry(func(ctx context.Context) error {
			err := g.kc.CoreV1().Pods(g.w.ns).Delete(ctx, c.pod, metav1.DeleteOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("delete pod %s: %w", c.pod, err)
		}
		g.truth.mu.Lock()
		last.toOK = time.Now()
		g.truth.mu.Unlock()
		ops.Add("unmount claim")
		// On nodes the pod terminates first (for as long as its node does
		// not answer); its operator marks the claim once it is gone (its
		// pod-delete event), as MarkUnmounted wants: a later step does.
		u := coldUnmount{c, scenario, early, late, stay}
		gone, err := g.podGone(c.pod)
		if err != nil {
			return err
		}
		if !gone {
			g.coldPending = append(g.coldPending, u)
			continue
		}
		if err := g.markCold(u, ops); err != nil {
			return err
		}
	}
	return nil
}

// coldUnmount is a cold claim whose pod was deleted, and what the
// generator drew for it.
type coldUnmount struct {
	c                 *claimTruth
	scenario          int
	early, late, stay time.Duration
}

// markColdPending marks the cold claims whose pods were deleted and are
// gone now.
func (g *gcWorkload) markColdPending(ops *chaos.Ops) error {
	pending := g.coldPending
	g.coldPending = nil
	for _, u := range pending {
		gone, err := g.podGone(u.c.pod)
		if err != nil {
			return err
		}
		if !gone {
			g.coldPending = append(g.coldPending, u)
			continue
		}
		if err := g.markCold(u, ops); err != nil {
			return err
		}
	}
	return nil
}

// markCold marks cold claim u.c unmounted, its pod gone, and sets its
// comeback and inspection as drawn.
func (g *gcWorkload) markCold(u coldUnmount, ops *chaos.Ops) error {
	c := u.c
	err := chaos.Retry(func(ctx context.Context) error {
		_, err := g.marker.MarkUnmounted(ctx, lifecycle.PodClaim{Namespace: g.w.ns, Pod: c.pod, Claim: c.name})
		return err
	})
	if err != nil {
		return fmt.Errorf("mark claim %s unmounted: %w", c.name, err)
	}
	// The mark says a second no later than now (lifecycle writes
	// seconds): it has expired by now plus the TTL.
	marked := time.Now()
	comeback := marked.Add(u.late)
	if u.scenario == 3 {
		comeback = marked.Add(u.early)
	}
	g.truth.mu.Lock()
	c.comeback = comeback
	g.truth.mu.Unlock()
	if u.scenario < 2 {
		return g.inspect(c, u.stay, ops)
	}
	return nil
}

// storageClass is the claims' class, nil for none.
func (g *gcWorkload) storageClass() *string {
	if g.w.storageClass == "" {
		return nil
	}
	return &g.w.storageClass
}

// podGrace is the pods' terminationGracePeriodSeconds, nil for the
// default.
func (g *gcWorkload) podGrace() *int64 {
	if g.w.podGrace == 0 {
		return nil
	}
	return &g.w.podGrace
}

// podGone reports whether pod is gone from the API server.
func (g *gcWorkload) podGone(pod string) (gone bool, err error) {
	err = chaos.Retry(func(ctx context.Context) error {
		_, err := g.kc.CoreV1().Pods(g.w.ns).Get(ctx, pod, metav1.GetOptions{})
		gone = apierrors.IsNotFound(err)
		if gone {
			return nil
		}
		return err
	})
	return gone, err
}

// runManager runs one replica until ctx ends or it exits.
func (g *gcWorkload) runManager(ctx context.Context, cfg *rest.Config, i int) error {
	flags := kubecmd.Flags{Namespace: g.w.ns, LeaderElect: true}
	mgr, err := flags.NewManager(rest.CopyConfig(cfg), "aerospike-gc", scheme, replicatest.CrashOptions(g.o.log.WithValues("replica", i)))
	if err != nil {
		return err
	}
	o := controllerOptions{namespace: g.w.ns, retryAfter: 2 * time.Second, claimSelector: "app=aerospike"}
	if err := setupCollector(mgr, o, g.o.clock, nil); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

func s3Secret(name, endpoint string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}}
	s.StringData = secretData(endpoint)
	return s
}

// pending lists what has expired (by now) but is not yet gone: backup
// resources, their keys, claims. Empty means the collectors caught up.
func (g *gcWorkload) pending(ctx context.Context, now time.Time) ([]string, error) {
	var list api.AerospikeNamespaceBackupList
	if err := g.cl.List(ctx, &list, client.InNamespace(g.w.ns)); err != nil {
		return nil, err
	}
	claims, err := g.kc.CoreV1().PersistentVolumeClaims(g.w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	if err := g.keys.List(ctx); err != nil {
		return nil, err
	}
	keys := g.keys.Keys()
	g.truth.mu.Lock()
	defer g.truth.mu.Unlock()
	var out []string
	for _, b := range list.Items {
		if t := g.truth.backups[b.Name]; t != nil && t.uid == b.UID {
			if e := t.expiry(); !e.IsZero() && e.Before(now) {
				out = append(out, "backup "+b.Name)
			}
		}
	}
	for _, name := range g.truth.order {
		t := g.truth.backups[name]
		if e := t.expiry(); !e.IsZero() && e.Before(now) {
			for _, k := range t.keys {
				if keys[k].GoneBy.IsZero() {
					out = append(out, "key "+k)
				}
			}
		}
	}
	for _, c := range claims.Items {
		if t := g.truth.claims[c.Name]; t != nil && t.uid == c.UID && c.DeletionTimestamp == nil {
			if e := t.expiry(); !e.IsZero() && e.Before(now) {
				out = append(out, "claim "+c.Name)
			}
		}
	}
	return out, nil
}

// settled: everything that will expire has, and is gone.
func (g *gcWorkload) settled(ctx context.Context) error {
	now := time.Now()
	g.truth.mu.Lock()
	var last time.Time
	for _, b := range g.truth.backups {
		if e := b.expiry(); e.After(last) {
			last = e
		}
	}
	for _, c := range g.truth.claims {
		if e := c.expiry(); e.After(last) {
			last = e
		}
	}
	g.truth.mu.Unlock()
	p, err := g.pending(ctx, now)
	if err != nil {
		return err
	}
	if len(p) > 0 {
		return fmt.Errorf("%d expired not collected: %s", len(p), strings.Join(p[:min(len(p), 5)], ", "))
	}
	if now.Before(last) {
		return fmt.Errorf("the last expiry is at %s", last.Format(time.RFC3339Nano))
	}
	return nil
}
