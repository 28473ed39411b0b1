package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/collect"
	"github.com/groundskeeper-io/groundskeeper/crt/claims"
	"github.com/groundskeeper-io/groundskeeper/examples/aerospike-gc/api"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/retention"
)

// The scenario: twelve days of one namespace, "aerospike", with an
// Aerospike cluster "orders" of three pods and its backups. The collector is
// the controller's own code; around it, a client-go fake clientset holds the
// Secrets, claims and pods, a map holds the backups, memblob buckets hold the
// backup data, and the clock is simulated. A pass runs after every change,
// as the informers would trigger it, and whenever the last pass asked to be
// requeued.
var scenarioStart = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

const (
	scenarioNamespace = "aerospike"
	scenarioDays      = 12
)

type sim struct {
	ctx     context.Context
	out     io.Writer
	clk     *clocktesting.FakeClock
	core    *fake.Clientset
	backups *simBackups
	// buckets are the object stores by URL; down makes one unreachable.
	buckets map[string]*blob.Bucket
	down    map[string]bool
	c       *collector
	uids    int
	// lastRequeue is what the last pass asked for.
	lastRequeue time.Duration
	// notes are the events and status writes of the current pass, by
	// object name, printed under the decision they belong to.
	notes map[string][]string
}

type simEvent struct {
	at time.Duration
	do func()
}

func runScenario(out io.Writer) error {
	ctx := context.Background()
	s := &sim{
		ctx:     ctx,
		out:     out,
		clk:     clocktesting.NewFakeClock(scenarioStart),
		core:    fake.NewClientset(),
		backups: &simBackups{items: map[string]*api.AerospikeNamespaceBackup{}},
		buckets: map[string]*blob.Bucket{"gs://aerospike-backups": memblob.OpenBucket(nil), "gs://offsite-backups": memblob.OpenBucket(nil)},
		down:    map[string]bool{},
		notes:   map[string][]string{},
	}
	s.backups.s = s
	defer func() {
		for _, b := range s.buckets {
			b.Close()
		}
	}()
	manager, err := lifecycle.New(lifecycle.Config{
		Client:      lifecycle.ClientGo(s.core.CoreV1()),
		Clock:       s.clk,
		Annotations: lifecycle.Annotations{Prefix: lifecycle.AerospikeAnnotationPrefix},
	})
	if err != nil {
		return err
	}
	bc, err := collect.New(backupConfig(collect.Config[*api.AerospikeNamespaceBackup]{
		Objects: s.backups, Secrets: backupstore.SecretsFrom(s.core.CoreV1()), Open: s.open,
		Recorder: lifecycle.EventFunc(s.event), Clock: s.clk, RetryAfter: 24 * time.Hour,
	}))
	if err != nil {
		return err
	}
	s.c = &collector{
		namespace: scenarioNamespace,
		backups:   bc,
		lifecycle: manager,
		unmounts:  claims.UnmountTracker{Lifecycle: manager, Claims: lifecycle.ClientGo(s.core.CoreV1()), Scope: lifecycle.Scope{Namespace: scenarioNamespace}},
		recorder:  lifecycle.EventFunc(s.event),
	}

	fmt.Fprintf(out, "Simulated timeline from %s UTC, namespace %q. Backup data is under backups/%s/<backup>/.\n\n",
		scenarioStart.Format(time.DateOnly), scenarioNamespace, scenarioNamespace)
	day := func(d int, hhmm time.Duration) time.Duration { return time.Duration(d)*retention.Day + hhmm }
	script := []simEvent{
		{0, func() {
			s.secret("gcs-creds")
			for i := range 3 {
				s.createPodAndClaim(i, "3d")
			}
			s.createBackup("orders-daily-1", "7d", "gs://aerospike-backups", "gcs-creds")
			s.createBackup("orders-daily-10", "30d", "gs://aerospike-backups", "gcs-creds")
			s.createBackup("orders-before-upgrade", "3d", "gs://aerospike-backups", "old-creds")
			s.createBackup("orders-offsite", "5d", "gs://offsite-backups", "gcs-creds")
			s.createBackup("orders-keep", "0d", "gs://aerospike-backups", "gcs-creds")
		}},
		{day(1, 10*time.Hour), func() {
			s.say("user", "scales orders down from 3 to 2: aerospike-operator deletes pod orders-2")
			s.deletePod("orders-2")
		}},
		{day(2, 9*time.Hour), func() {
			s.say("user", "changes the configuration of orders: aerospike-operator restarts pod orders-1")
			s.deletePod("orders-1")
		}},
		{day(2, 9*time.Hour+5*time.Minute), func() { s.recreatePod(1) }},
		{day(4, 12*time.Hour), func() {
			s.down["gs://offsite-backups"] = true
			s.say("store", "gs://offsite-backups becomes unreachable")
		}},
		{day(6, 8*time.Hour), func() {
			s.say("user", `creates Secret "old-creds"`)
			s.secret("old-creds")
		}},
		{day(6, 18*time.Hour), func() {
			s.down["gs://offsite-backups"] = false
			s.say("store", "gs://offsite-backups is reachable again")
		}},
	}

	// Play the script and the passes in time order: a pass right after
	// every change (as the informers would trigger it), and when the last
	// pass asked to be requeued.
	end := scenarioStart.Add(scenarioDays * retention.Day)
	var next time.Time
	for {
		at, do := end, func() {}
		if len(script) > 0 {
			at, do = scenarioStart.Add(script[0].at), func() { script[0].do(); script = script[1:]; s.pass() }
		}
		if !next.IsZero() && next.Before(at) {
			at, do = next, s.pass
		}
		if !at.Before(end) {
			break
		}
		s.clk.SetTime(at)
		next = time.Time{}
		do()
		if rq := s.lastRequeue; rq > 0 {
			next = s.clk.Now().Add(rq)
		}
	}
	s.clk.SetTime(end)
	fmt.Fprintf(out, "\nEnd, %s:\n", clockTime(end))
	return s.summary()
}

func clockTime(t time.Time) string { return t.UTC().Format("Jan 02 15:04") }

func (s *sim) say(who, what string) {
	fmt.Fprintf(s.out, "%s  %-5s  %s\n", clockTime(s.clk.Now()), who, what)
}

func (s *sim) uid() types.UID {
	s.uids++
	return types.UID(fmt.Sprintf("uid-%03d", s.uids))
}

// collector is what the controllers run, called in turn: the backup pass,
// the claim pass, and the unmount marks.
type collector struct {
	namespace string
	backups   *collect.Collector[*api.AerospikeNamespaceBackup]
	lifecycle *lifecycle.Manager
	unmounts  claims.UnmountTracker
	recorder  lifecycle.EventRecorder
}

// simReport is the report of one pass over backups and claims.
type simReport struct {
	Now          time.Time
	Backups      []collect.Outcome
	Claims       lifecycle.CollectResult
	RequeueAfter time.Duration
}

// pass runs the backup pass, then the claim pass, as the two controllers
// would, and records the ClaimCollected events as claims.Collector does.
func (c *collector) pass(ctx context.Context) (simReport, error) {
	b, err := c.backups.Pass(ctx, c.namespace)
	rep := simReport{Now: b.Now, Backups: b.Backups}
	if err != nil {
		return rep, err
	}
	res, err := c.lifecycle.Collect(ctx, lifecycle.CollectOptions{Scope: c.unmounts.Scope})
	rep.Claims = res
	for _, d := range res.Deleted {
		c.recorder.Event(&corev1.ObjectReference{APIVersion: "v1", Kind: "PersistentVolumeClaim",
			Namespace: c.namespace, Name: d.Claim, UID: d.UID}, corev1.EventTypeNormal, lifecycle.ReasonClaimCollected, d.Reason)
	}
	if err != nil {
		return rep, fmt.Errorf("collect claims: %w", err)
	}
	rep.RequeueAfter = b.RequeueAfter
	if !res.Next.IsZero() {
		if d := max(res.Next.Sub(b.Now), time.Nanosecond); rep.RequeueAfter == 0 || d < rep.RequeueAfter {
			rep.RequeueAfter = d
		}
	}
	return rep, nil
}

// pass runs one collection and prints what it decided.
func (s *sim) pass() {
	rep, err := s.c.pass(s.ctx)
	if err != nil {
		s.say("gc", "pass failed: "+err.Error())
	}
	for _, o := range rep.Backups {
		if o.Deleted {
			s.say("gc", fmt.Sprintf("backup %s expired: %s", o.Name, o.Message))
		} else {
			s.say("gc", fmt.Sprintf("backup %s expired, KEPT: %s", o.Name, o.Message))
		}
		s.flushNotes(o.Name)
	}
	for _, d := range rep.Claims.Deleted {
		s.say("gc", "deleted "+d.Reason)
		s.flushNotes(d.Claim)
	}
	for _, sk := range rep.Claims.Skipped {
		s.say("gc", fmt.Sprintf("claim %s kept (%s): %s", sk.Claim, sk.Reason, sk.Detail))
	}
	for name := range s.notes {
		panic(fmt.Sprintf("notes about %s without a decision", name))
	}
	s.lastRequeue = rep.RequeueAfter
	if rep.RequeueAfter > 0 && (len(rep.Backups) > 0 || len(rep.Claims.Deleted) > 0) {
		s.say("gc", "next pass due at "+clockTime(rep.Now.Add(rep.RequeueAfter)))
	}
}

// event notes the events the collector records.
func (s *sim) event(obj runtime.Object, eventtype, reason, _ string) {
	name, kind := "", api.Kind
	switch o := obj.(type) {
	case *corev1.ObjectReference:
		name, kind = o.Name, o.Kind
	case *api.AerospikeNamespaceBackup:
		name = o.Name
	}
	s.note(name, fmt.Sprintf("event   %s %s on %s %s", eventtype, reason, kind, name))
}

// decide reports whether b has expired at now and, if not, when it will
// (zero: never): backupPolicy judged alone, as the collector judges it.
func decide(b *api.AerospikeNamespaceBackup, now time.Time) (expired bool, at time.Time, err error) {
	p, err := backupPolicy(b)
	if err != nil {
		return false, time.Time{}, err
	}
	var res retention.Result
	alone := retention.Options{AllowDeleteNewest: true}
	if err := alone.Evaluate(p, now, []retention.Item{{ID: b.Name, Time: b.CreationTimestamp.Time}}, &res); err != nil {
		return false, time.Time{}, err
	}
	return !res.Decisions[0].Keep, res.Decisions[0].DeletableAt, nil
}

func (s *sim) note(name, what string) { s.notes[name] = append(s.notes[name], what) }

func (s *sim) flushNotes(name string) {
	for _, n := range s.notes[name] {
		fmt.Fprintf(s.out, "%s         %s\n", strings.Repeat(" ", len(clockTime(s.clk.Now()))), n)
	}
	delete(s.notes, name)
}

// open opens the scenario's in-memory buckets; the credentials are checked
// only for being there, as the store would.
func (s *sim) open(_ context.Context, url string, creds *backupstore.Credentials) (*blob.Bucket, func() error, error) {
	b, ok := s.buckets[url]
	if !ok {
		return nil, nil, fmt.Errorf("no bucket %s", url)
	}
	if creds == nil || len(creds.ServiceAccountJSON) == 0 {
		return nil, nil, errors.New("no credentials")
	}
	if s.down[url] {
		return nil, nil, fmt.Errorf("dial tcp: lookup storage.googleapis.com: i/o timeout (simulated outage)")
	}
	return b, func() error { return nil }, nil
}

func (s *sim) secret(name string) {
	_, err := s.core.CoreV1().Secrets(scenarioNamespace).Create(s.ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: scenarioNamespace, Name: name, UID: s.uid()},
		Data:       map[string][]byte{backupstore.SecretKeyServiceAccountJSON: []byte(`{"type": "service_account"}`)},
	}, metav1.CreateOptions{})
	if err != nil {
		panic(err)
	}
}

// createBackup stores the backup's data (three objects) in its bucket and
// creates the resource, as aerospike-operator does after a backup job.
func (s *sim) createBackup(name, ttl, bucket, secret string) {
	b := &api.AerospikeNamespaceBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: scenarioNamespace, Name: name, UID: s.uid(), Generation: 1,
			CreationTimestamp: metav1.NewTime(s.clk.Now())},
		Spec: api.AerospikeNamespaceBackupSpec{
			Target:  api.TargetNamespace{Cluster: "orders", Namespace: "orders"},
			Storage: api.BackupStorageSpec{Type: "gcs", Bucket: strings.TrimPrefix(bucket, "gs://"), Secret: secret},
			TTL:     ttl,
		},
	}
	prefix := dataPrefix(b)
	for i, key := range []string{"part-0001.asb", "part-0002.asb", "metadata.json"} {
		data := strings.Repeat("x", 1000*(i+1))
		if err := s.buckets[bucket].WriteAll(s.ctx, prefix+key, []byte(data), nil); err != nil {
			panic(err)
		}
	}
	s.backups.items[name] = b
	s.backups.rv++
	b.ResourceVersion = fmt.Sprint(s.backups.rv)
	s.say("user", fmt.Sprintf("backup %s: ttl %s, %s/%s (3 objects), secret %s", name, ttl, bucket, prefix, secret))
}

// createPodAndClaim is what aerospike-operator does for a new pod: a claim
// with the unmount tracking annotations (pod-name, pvc-ttl from the
// cluster's persistentVolumeClaimTTL), then the pod that mounts it.
func (s *sim) createPodAndClaim(i int, ttl string) {
	d, err := retention.ParseDuration(ttl)
	if err != nil {
		panic(err)
	}
	pod, claim := fmt.Sprintf("orders-%d", i), fmt.Sprintf("data-orders-%d", i)
	_, err = s.core.CoreV1().PersistentVolumeClaims(scenarioNamespace).Create(s.ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: scenarioNamespace, Name: claim, UID: s.uid(),
			Annotations: s.c.lifecycle.Annotations().Track(pod, d)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("150Gi")}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		panic(err)
	}
	s.createPod(i)
	s.say("user", fmt.Sprintf("aerospike-operator creates claim %s (pvc-ttl %s, pod-name %s) and pod %s", claim, ttl, pod, pod))
}

func (s *sim) createPod(i int) {
	pod, claim := fmt.Sprintf("orders-%d", i), fmt.Sprintf("data-orders-%d", i)
	_, err := s.core.CoreV1().Pods(scenarioNamespace).Create(s.ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: scenarioNamespace, Name: pod, UID: s.uid()},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		panic(err)
	}
}

// deletePod deletes a pod; the controller's pod watch would then hand each
// of its claims to markUnmounted.
func (s *sim) deletePod(name string) {
	pod, err := s.core.CoreV1().Pods(scenarioNamespace).Get(s.ctx, name, metav1.GetOptions{})
	if err != nil {
		panic(err)
	}
	if err := s.core.CoreV1().Pods(scenarioNamespace).Delete(s.ctx, name, metav1.DeleteOptions{}); err != nil {
		panic(err)
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		marked, err := s.c.unmounts.Mark(s.ctx, scenarioNamespace, v.PersistentVolumeClaim.ClaimName)
		if err != nil {
			panic(err)
		}
		if marked {
			c, _ := s.core.CoreV1().PersistentVolumeClaims(scenarioNamespace).Get(s.ctx, v.PersistentVolumeClaim.ClaimName, metav1.GetOptions{})
			s.say("gc", fmt.Sprintf("pod %s is gone: claim %s marked %s=%s", name, c.Name,
				s.c.lifecycle.Annotations().LastUnmountedKey(), c.Annotations[s.c.lifecycle.Annotations().LastUnmountedKey()]))
		}
	}
}

// recreatePod is aerospike-operator re-creating a pod: it checks the claim
// first (lifecycle's CheckReuse), which removes last-unmounted-on from a
// claim it may reuse, then creates the pod.
func (s *sim) recreatePod(i int) {
	pod, claim := fmt.Sprintf("orders-%d", i), fmt.Sprintf("data-orders-%d", i)
	dec, err := s.c.lifecycle.CheckReuse(s.ctx, lifecycle.PodClaim{Namespace: scenarioNamespace, Pod: pod, Claim: claim}, nil)
	if err != nil {
		panic(err)
	}
	if dec.Verdict != lifecycle.VerdictReuse {
		panic(fmt.Sprintf("claim %s: %s %s", claim, dec.Verdict, dec.Reason))
	}
	s.createPod(i)
	s.say("user", fmt.Sprintf("aerospike-operator re-creates pod %s; CheckReuse: %s claim %s, last-unmounted-on removed", pod, dec.Verdict, claim))
}

// summary prints what is left: backups with their conditions, the objects
// in each bucket, and the claims.
func (s *sim) summary() error {
	names := make([]string, 0, len(s.backups.items))
	for n := range s.backups.items {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		b := s.backups.items[n]
		exp, at, err := decide(b, s.clk.Now())
		if err != nil {
			return err
		}
		state := "keeps forever"
		if !at.IsZero() {
			state = "expires " + clockTime(at)
		} else if exp {
			state = "expired"
		}
		line := fmt.Sprintf("  backup %-22s ttl %-4s %s", n, b.Spec.TTL, state)
		if c := meta.FindStatusCondition(b.Status.Conditions, api.ConditionDataDeleted); c != nil {
			line += fmt.Sprintf("; %s=%s (%s)", c.Type, c.Status, c.Reason)
		}
		fmt.Fprintln(s.out, line)
	}
	urls := make([]string, 0, len(s.buckets))
	for u := range s.buckets {
		urls = append(urls, u)
	}
	slices.Sort(urls)
	for _, u := range urls {
		iter := s.buckets[u].List(&blob.ListOptions{Prefix: "backups/" + scenarioNamespace + "/", Delimiter: "/"})
		var dirs []string
		for {
			o, err := iter.Next(s.ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
			dirs = append(dirs, strings.TrimPrefix(o.Key, "backups/"+scenarioNamespace+"/"))
		}
		fmt.Fprintf(s.out, "  %s holds data of %v\n", u, dirs)
	}
	claims, err := s.core.CoreV1().PersistentVolumeClaims(scenarioNamespace).List(s.ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, c := range claims.Items {
		u, err := s.c.lifecycle.Annotations().Read(&c)
		if err != nil {
			return err
		}
		state := "mounted by " + u.Pod
		if !u.Since.IsZero() {
			state = "unmounted since " + clockTime(u.Since)
		}
		fmt.Fprintf(s.out, "  claim %s: %s\n", c.Name, state)
	}
	return nil
}

// simBackups is the scenario's API server for backups: a map, with
// resource versions and the delete preconditions checked as the API
// server checks them.
type simBackups struct {
	s     *sim
	items map[string]*api.AerospikeNamespaceBackup
	rv    int
}

var backupGR = schema.GroupResource{Group: api.Group, Resource: api.Resource}

func (b *simBackups) List(context.Context, string) ([]*api.AerospikeNamespaceBackup, error) {
	out := make([]*api.AerospikeNamespaceBackup, 0, len(b.items))
	for _, v := range b.items {
		out = append(out, v.DeepCopy())
	}
	return out, nil
}

func (b *simBackups) Get(_ context.Context, _, name string) (*api.AerospikeNamespaceBackup, error) {
	v, ok := b.items[name]
	if !ok {
		return nil, apierrors.NewNotFound(backupGR, name)
	}
	return v.DeepCopy(), nil
}

func (b *simBackups) UpdateStatus(_ context.Context, nb *api.AerospikeNamespaceBackup) error {
	v, ok := b.items[nb.Name]
	if !ok {
		return apierrors.NewNotFound(backupGR, nb.Name)
	}
	if v.ResourceVersion != nb.ResourceVersion {
		return apierrors.NewConflict(backupGR, nb.Name, errors.New("the object has been modified"))
	}
	b.rv++
	v.Status = *nb.Status.DeepCopy()
	v.ResourceVersion = fmt.Sprint(b.rv)
	for _, c := range v.Status.Conditions {
		b.s.note(v.Name, fmt.Sprintf("status  %s=%s, reason %s", c.Type, c.Status, c.Reason))
	}
	return nil
}

func (b *simBackups) Delete(_ context.Context, _, name string, uid types.UID, rv string) error {
	v, ok := b.items[name]
	if !ok {
		return apierrors.NewNotFound(backupGR, name)
	}
	if v.UID != uid || v.ResourceVersion != rv {
		return apierrors.NewConflict(backupGR, name, errors.New("precondition failed"))
	}
	delete(b.items, name)
	return nil
}

// Update is never called: the collector has no finalizer.
func (b *simBackups) Update(context.Context, *api.AerospikeNamespaceBackup) error {
	return errors.New("simBackups: Update: the scenario's collector has no finalizer")
}
