package collect_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"gocloud.dev/blob"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/collect"
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/s3store"
	"github.com/groundskeeper-io/groundskeeper/internal/event"
	"github.com/groundskeeper-io/groundskeeper/internal/testbackup"
	"github.com/groundskeeper-io/groundskeeper/retention"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

type backup = testbackup.Backup

// dynObjects is collect.Objects over client-go's dynamic client, as a
// client-go user writes it. beforeDelete, if set, runs before each delete:
// another writer acting between the collector's decision and its delete.
type dynObjects struct {
	d            dynamic.Interface
	beforeDelete func(name string)
}

func (o dynObjects) List(ctx context.Context, ns string) ([]*backup, error) {
	l, err := o.d.Resource(testbackup.Resource).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []*backup
	for i := range l.Items {
		b, err := testbackup.FromUnstructured(&l.Items[i])
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

func (o dynObjects) Get(ctx context.Context, ns, name string) (*backup, error) {
	u, err := o.d.Resource(testbackup.Resource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return testbackup.FromUnstructured(u)
}

func (o dynObjects) UpdateStatus(ctx context.Context, b *backup) error {
	u, err := testbackup.ToUnstructured(b)
	if err != nil {
		return err
	}
	_, err = o.d.Resource(testbackup.Resource).Namespace(b.Namespace).UpdateStatus(ctx, u, metav1.UpdateOptions{})
	return err
}

func (o dynObjects) Update(ctx context.Context, b *backup) error {
	u, err := testbackup.ToUnstructured(b)
	if err != nil {
		return err
	}
	_, err = o.d.Resource(testbackup.Resource).Namespace(b.Namespace).Update(ctx, u, metav1.UpdateOptions{})
	return err
}

func (o dynObjects) Delete(ctx context.Context, ns, name string, uid types.UID, rv string) error {
	if o.beforeDelete != nil {
		o.beforeDelete(name)
	}
	return o.d.Resource(testbackup.Resource).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
}

// events records the events of a collector.
type events struct {
	mu   sync.Mutex
	seen []string // "name type reason"
}

func (e *events) Event(obj runtime.Object, eventtype, reason, _ string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seen = append(e.seen, fmt.Sprintf("%s %s %s", obj.(*backup).Name, eventtype, reason))
}

func (e *events) has(s string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Contains(e.seen, s)
}

var _ event.Recorder = (*events)(nil)

// env is one test's API server, bucket and collector configuration.
type env struct {
	t      *testing.T
	ctx    context.Context
	k      *testenv.Kubernetes
	d      dynamic.Interface
	store  *testenv.BlobStore
	bucket *blob.Bucket
	clk    *clocktesting.FakeClock
	events *events
}

func newEnv(t *testing.T, o testenv.BucketOptions) *env {
	k := testenv.StartKubernetes(t)
	d, err := testbackup.Install(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	store := testenv.S3With(t, o)
	e := &env{t: t, ctx: logr.NewContext(context.Background(), testr.New(t)), k: k, d: d, store: store,
		bucket: store.Open(t), clk: clocktesting.NewFakeClock(time.Now()), events: &events{}}
	e.secret("minio")
	return e
}

func (e *env) secret(name string) {
	e.t.Helper()
	_, err := e.k.Client.CoreV1().Secrets(e.k.Namespace).Create(e.ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		StringData: map[string]string{
			backupstore.SecretKeyAccessKeyID:     testenv.S3AccessKeyID,
			backupstore.SecretKeySecretAccessKey: testenv.S3SecretAccessKey,
			backupstore.SecretKeyRegion:          testenv.S3Region,
			backupstore.SecretKeyEndpoint:        e.store.Endpoint,
			backupstore.SecretKeyS3PathStyle:     "true",
		},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
}

// backup creates a backup whose data (two keys) is under prefix.
func (e *env) backup(name, prefix, secret string, mutate func(*backup)) []string {
	e.t.Helper()
	b := &backup{ObjectMeta: metav1.ObjectMeta{Namespace: e.k.Namespace, Name: name},
		Spec: testbackup.Spec{Bucket: e.store.Bucket, Prefix: prefix, Secret: secret, TTL: "7d"}}
	if mutate != nil {
		mutate(b)
	}
	u, err := testbackup.ToUnstructured(b)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.d.Resource(testbackup.Resource).Namespace(e.k.Namespace).Create(e.ctx, u, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	keys := []string{prefix + "part-0001", prefix + "meta.json"}
	for _, k := range keys {
		if err := e.bucket.WriteAll(e.ctx, k, []byte("data of "+k), nil); err != nil {
			e.t.Fatal(err)
		}
	}
	return keys
}

func (e *env) get(name string) (*backup, error) {
	return dynObjects{d: e.d}.Get(e.ctx, e.k.Namespace, name)
}

// keys returns every key in the bucket.
func (e *env) keys() []string {
	e.t.Helper()
	var out []string
	it := e.bucket.List(nil)
	for {
		o, err := it.Next(e.ctx)
		if err != nil {
			break
		}
		out = append(out, o.Key)
	}
	slices.Sort(out)
	return out
}

func (e *env) wantKeys(want ...[]string) {
	e.t.Helper()
	w := slices.Concat(want...)
	slices.Sort(w)
	if got := e.keys(); !slices.Equal(got, w) {
		e.t.Errorf("keys in the bucket: %v, want %v", got, w)
	}
}

// config is the collector of testbackup.Backups by their spec.ttl.
func (e *env) config(objs collect.Objects[*backup]) collect.Config[*backup] {
	return collect.Config[*backup]{
		Objects: objs,
		Secrets: backupstore.SecretsFrom(e.k.Client.CoreV1()),
		Location: func(_ context.Context, b *backup) (collect.Location, error) {
			return collect.Location{URL: "s3://" + b.Spec.Bucket, Prefix: b.Spec.Prefix, Secret: b.Spec.Secret, SecretField: "spec.secret"}, nil
		},
		Keep: collect.BackupPolicy[*backup](func(b *backup) (retention.Policy, error) {
			d, err := retention.ParseDuration(b.Spec.TTL)
			return retention.TTL{After: d}, err
		}),
		Recorder:   e.events,
		Clock:      e.clk,
		RetryAfter: time.Minute,
	}
}

func (e *env) collector(cfg collect.Config[*backup]) *collect.Collector[*backup] {
	e.t.Helper()
	c, err := collect.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func (e *env) pass(c *collect.Collector[*backup]) collect.Report {
	e.t.Helper()
	rep, err := c.Pass(e.ctx, e.k.Namespace)
	if err != nil {
		e.t.Fatal(err)
	}
	return rep
}

func names(outs []collect.Outcome, deleted bool) []string {
	var out []string
	for _, o := range outs {
		if o.Deleted == deleted {
			out = append(out, o.Name)
		}
	}
	return out
}

func (e *env) condition(name string) *metav1.Condition {
	e.t.Helper()
	b, err := e.get(name)
	if err != nil {
		e.t.Fatal(err)
	}
	return meta.FindStatusCondition(b.Status.Conditions, collect.ConditionDataDeleted)
}

// A group policy (the newest successful backup of each database), with
// outcomes: a dry run lists exactly the keys it would delete and writes
// nothing; the real pass deletes those keys and then the resources, and
// nothing beside them. The newest backup, whose outcome is not known yet,
// is neither deleted nor allowed to push the newest good one out.
func TestGroupPolicyPass(t *testing.T) {
	e := newEnv(t, testenv.BucketOptions{})
	now := e.clk.Now().UTC().Truncate(time.Second)
	at := func(ago time.Duration, outcome string) func(*backup) {
		return func(b *backup) {
			b.Annotations = map[string]string{"taken": now.Add(-ago).Format(time.RFC3339)}
			b.Spec.Database = "orders"
			b.Status.Outcome = outcome
		}
	}
	old := e.backup("old", "orders/old/", "minio", at(4*time.Hour, "Succeeded"))
	good := e.backup("good", "orders/good/", "minio", at(3*time.Hour, "Succeeded"))
	failed := e.backup("failed", "orders/failed/", "minio", at(2*time.Hour, "Failed"))
	running := e.backup("running", "orders/running/", "minio", at(time.Hour, ""))
	other := e.backup("other-db", "users/old/", "minio", func(b *backup) {
		at(5*time.Hour, "Succeeded")(b)
		b.Spec.Database = "users"
	})
	beside := []string{"orders/old.log"} // beside old/, not under it
	if err := e.bucket.WriteAll(e.ctx, beside[0], []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	// The status subresource drops status on create: write it.
	for _, n := range []string{"old", "good", "failed", "other-db"} {
		b, err := e.get(n)
		if err != nil {
			t.Fatal(err)
		}
		b.Status.Outcome = map[string]string{"failed": "Failed"}[n]
		if b.Status.Outcome == "" {
			b.Status.Outcome = "Succeeded"
		}
		if err := (dynObjects{d: e.d}).UpdateStatus(e.ctx, b); err != nil {
			t.Fatal(err)
		}
	}

	cfg := e.config(dynObjects{d: e.d})
	policy := collect.GroupPolicy[*backup]{
		Policy: func(context.Context, string) (retention.Policy, error) { return retention.Newest{N: 1}, nil },
		Group:  func(b *backup) string { return b.Spec.Database },
	}
	cfg.Keep = policy
	cfg.Time = func(b *backup) time.Time {
		t, _ := time.Parse(time.RFC3339, b.Annotations["taken"])
		return t
	}
	if _, err := collect.New(cfg); err == nil || !strings.Contains(err.Error(), "GroupPolicy.Outcome") {
		t.Fatalf("New without Outcome: %v, want an error naming GroupPolicy.Outcome", err)
	}
	policy.Outcome = func(b *backup) retention.Outcome {
		return map[string]retention.Outcome{"Succeeded": retention.OutcomeSucceeded, "Failed": retention.OutcomeFailed}[b.Status.Outcome]
	}
	cfg.Keep = policy

	cfg.DryRun.Enabled = true
	rep := e.pass(e.collector(cfg))
	if got := names(rep.Backups, true); !slices.Equal(got, []string{"failed", "old"}) {
		t.Fatalf("dry run would delete %v, want [failed old]; report %+v", got, rep)
	}
	var would []string
	for _, o := range rep.Backups {
		would = append(would, o.Keys...)
	}
	slices.Sort(would)
	if want := slices.Sorted(slices.Values(slices.Concat(old, failed))); !slices.Equal(would, want) {
		t.Errorf("dry run keys %v, want exactly %v", would, want)
	}
	kept := map[string]string{}
	for _, k := range rep.Kept {
		kept[k.Name] = k.Why
	}
	if kept["running"] != "outcome unknown" || !strings.Contains(kept["good"], "newest") {
		t.Errorf("kept: %v; want running for its unknown outcome and good as the newest", kept)
	}
	e.wantKeys(old, good, failed, running, other, beside)
	if len(e.events.seen) != 0 {
		t.Errorf("dry run recorded events %v", e.events.seen)
	}

	cfg.DryRun.Enabled = false
	rep = e.pass(e.collector(cfg))
	if got := names(rep.Backups, true); !slices.Equal(got, []string{"failed", "old"}) {
		t.Fatalf("pass deleted %v, want [failed old]; report %+v", got, rep)
	}
	e.wantKeys(good, running, other, beside)
	for _, n := range []string{"old", "failed"} {
		if _, err := e.get(n); !apierrors.IsNotFound(err) {
			t.Errorf("backup %s: %v, want NotFound", n, err)
		}
		if !e.events.has(n + " Normal " + collect.ReasonCollected) {
			t.Errorf("no %s event on %s: %v", collect.ReasonCollected, n, e.events.seen)
		}
	}
}

// A backup whose Secret is missing is kept, with the condition, a Warning
// event and a retry after RetryAfter; once the Secret exists, the retry
// collects it.
func TestSecretMissingKeepsTheBackup(t *testing.T) {
	e := newEnv(t, testenv.BucketOptions{})
	keys := e.backup("b", "db/b/", "absent", nil)
	c := e.collector(e.config(dynObjects{d: e.d}))
	e.clk.Step(8 * retention.Day)
	rep := e.pass(c)
	if len(rep.Backups) != 1 || rep.Backups[0].Reason != collect.ReasonSecretNotFound {
		t.Fatalf("outcomes %+v, want b kept as SecretNotFound", rep.Backups)
	}
	if rep.RequeueAfter != time.Minute {
		t.Errorf("RequeueAfter = %s, want RetryAfter (1m)", rep.RequeueAfter)
	}
	cond := e.condition("b")
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != collect.ReasonSecretNotFound || !strings.Contains(cond.Message, `spec.secret "absent"`) {
		t.Errorf("condition %+v, want DataDeleted=False SecretNotFound naming spec.secret", cond)
	}
	if !e.events.has("b Warning " + collect.ReasonSecretNotFound) {
		t.Errorf("events %v", e.events.seen)
	}
	e.wantKeys(keys)
	e.secret("absent")
	if rep := e.pass(c); len(rep.Backups) != 0 {
		t.Errorf("a pass before the retry is due acted: %+v", rep.Backups)
	}
	e.clk.Step(time.Minute)
	if rep := e.pass(c); !slices.Equal(names(rep.Backups, true), []string{"b"}) {
		t.Errorf("the retry: %+v, want b collected", rep.Backups)
	}
	e.wantKeys()
}

// A backup that changed, or was deleted and created again, after the
// collector decided on it is not deleted: the delete carries the UID and
// resourceVersion of the version decided on. (Moved from the aerospike-gc
// example.)
func TestBackupChangedMeanwhileIsKept(t *testing.T) {
	e := newEnv(t, testenv.BucketOptions{})
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, name string)
	}{
		{"labelled meanwhile", func(t *testing.T, name string) {
			b, err := e.get(name)
			if err != nil {
				t.Fatal(err)
			}
			b.Labels = map[string]string{"keep": "please"}
			if err := (dynObjects{d: e.d}).Update(e.ctx, b); err != nil {
				t.Fatal(err)
			}
		}},
		{"deleted and created again meanwhile", func(t *testing.T, name string) {
			if err := e.d.Resource(testbackup.Resource).Namespace(e.k.Namespace).Delete(e.ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			e.backup(name, "db/"+name+"/", "minio", nil)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := strings.ReplaceAll(tc.name, " ", "-")
			e.backup(name, "db/"+name+"/", "minio", nil)
			before, err := e.get(name)
			if err != nil {
				t.Fatal(err)
			}
			raced := false
			objs := dynObjects{d: e.d, beforeDelete: func(n string) {
				if n == name && !raced {
					raced = true
					tc.change(t, name)
				}
			}}
			cfg := e.config(objs)
			cfg.Clock = clocktesting.NewFakeClock(time.Now().Add(8 * retention.Day))
			rep := e.pass(e.collector(cfg))
			if !raced {
				t.Fatalf("the collector did not try to delete %s: %+v", name, rep)
			}
			after, err := e.get(name)
			if err != nil {
				t.Fatalf("backup %s was deleted: %v", name, err)
			}
			if after.ResourceVersion == before.ResourceVersion {
				t.Fatalf("backup %s did not change", name)
			}
			if slices.Contains(names(rep.Backups, true), name) {
				t.Errorf("reported deleted: %+v", rep.Backups)
			}
			if err := e.d.Resource(testbackup.Resource).Namespace(e.k.Namespace).Delete(e.ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A backup whose prefix puts its data under another backup's prefix: when
// the outer one expires, deleting its data would delete the inner one's.
// Both are kept, with their data, and the expired one says why, in a dry
// run and for real. (Moved from the aerospike-gc example.)
func TestNestedDataPrefixesAreNeverDeleted(t *testing.T) {
	e := newEnv(t, testenv.BucketOptions{})
	outer := e.backup("outer", "db/outer/", "minio", nil)
	inner := e.backup("inner", "db/outer/inner/", "minio", func(b *backup) { b.Spec.TTL = "30d" })
	sibling := e.backup("outer0", "db/outer0/", "minio", func(b *backup) { b.Spec.TTL = "30d" })
	cfg := e.config(dynObjects{d: e.d})
	cfg.Clock = clocktesting.NewFakeClock(time.Now().Add(8 * retention.Day))
	for _, dry := range []bool{true, false} {
		cfg.DryRun.Enabled = dry
		rep := e.pass(e.collector(cfg))
		if len(rep.Backups) != 1 || rep.Backups[0].Name != "outer" || rep.Backups[0].Deleted || rep.Backups[0].Reason != collect.ReasonNestedPrefix {
			t.Errorf("dry run %v: outcomes %+v, want outer kept as %s", dry, rep.Backups, collect.ReasonNestedPrefix)
		}
	}
	e.wantKeys(outer, inner, sibling)
	if _, err := e.get("outer"); err != nil {
		t.Errorf("outer: %v", err)
	}
	if cond := e.condition("outer"); cond == nil || cond.Reason != collect.ReasonNestedPrefix || !strings.Contains(cond.Message, "inner") {
		t.Errorf("condition of outer: %+v, want DataDeleted=False NestedPrefix naming inner", cond)
	}
}

// Two teams' backups in one bucket: team-b's backup, in another namespace
// and naming the bucket with a region the other's URL leaves out, keeps its
// data under team-a's expired backup's prefix. The bucket is one bucket, and
// the namespaces share it: team-a's backup is kept, NestedPrefix naming
// team-b's, and no key goes.
func TestNestedPrefixAcrossNamespacesAndSpellings(t *testing.T) {
	e := newEnv(t, testenv.BucketOptions{})
	outer := e.backup("db", "db/", "minio", nil)
	other, err := e.k.Client.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "team-b-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	inner := &backup{ObjectMeta: metav1.ObjectMeta{Namespace: other.Name, Name: "db"},
		Spec: testbackup.Spec{Bucket: e.store.Bucket + "?region=" + testenv.S3Region, Prefix: "db/team-b/", Secret: "minio", TTL: "30d"}}
	u, err := testbackup.ToUnstructured(inner)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.d.Resource(testbackup.Resource).Namespace(other.Name).Create(e.ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	innerKeys := []string{"db/team-b/part-0001"}
	if err := e.bucket.WriteAll(e.ctx, innerKeys[0], []byte("team-b's"), nil); err != nil {
		t.Fatal(err)
	}
	cfg := e.config(dynObjects{d: e.d})
	cfg.Clock = clocktesting.NewFakeClock(time.Now().Add(8 * retention.Day))
	rep := e.pass(e.collector(cfg))
	if len(rep.Backups) != 1 || rep.Backups[0].Deleted || rep.Backups[0].Reason != collect.ReasonNestedPrefix ||
		!strings.Contains(rep.Backups[0].Message, other.Name+"/db") {
		t.Errorf("outcomes %+v, want db kept as %s naming %s/db", rep.Backups, collect.ReasonNestedPrefix, other.Name)
	}
	e.wantKeys(outer, innerKeys)
}

// S3 Object Lock keeps one object of an expired backup: the pass deletes
// the rest, keeps the resource with DataDeleted=False, Retained naming the
// key and its retain-until time, and comes back at that time, not after
// RetryAfter; the pass after the retention ends collects it. (Moved from
// the aerospike-gc example.)
func TestObjectLockedBackupIsCollectedWhenTheRetentionEnds(t *testing.T) {
	e := newEnv(t, testenv.BucketOptions{ObjectLock: true})
	keys := e.backup("locked", "db/locked/", "minio", nil)
	var s3c *s3.Client
	if !e.bucket.As(&s3c) {
		t.Fatal("not an S3 bucket")
	}
	until := time.Now().Add(12 * time.Second).UTC().Truncate(time.Second)
	if _, err := s3c.PutObjectRetention(e.ctx, &s3.PutObjectRetentionInput{
		Bucket: aws.String(e.store.Bucket), Key: aws.String(keys[0]),
		Retention: &s3types.ObjectLockRetention{Mode: s3types.ObjectLockRetentionModeCompliance, RetainUntilDate: aws.Time(until)},
	}); err != nil {
		t.Fatal(err)
	}
	cfg := e.config(dynObjects{d: e.d})
	cfg.RetryAfter = time.Hour
	// The TTL counts days: the fake clock stands eight days after the
	// retention's start, which MinIO measures in real time.
	cfg.Clock = clocktesting.NewFakeClock(time.Now().Add(8 * retention.Day))
	c := e.collector(cfg)
	rep := e.pass(c)
	if len(rep.Backups) != 1 || rep.Backups[0].Reason != collect.ReasonRetained || rep.Backups[0].Deleted {
		t.Fatalf("first pass: %+v; want the backup kept as Retained", rep.Backups)
	}
	b, err := e.get("locked")
	if err != nil {
		t.Fatalf("the backup resource is gone while its data is retained: %v", err)
	}
	cond := meta.FindStatusCondition(b.Status.Conditions, collect.ConditionDataDeleted)
	if cond == nil || cond.Reason != collect.ReasonRetained {
		t.Fatalf("condition %+v; want DataDeleted=False, Retained", cond)
	}
	for _, want := range []string{keys[0], "retained until " + until.Format(time.RFC3339) + " by object lock"} {
		if !strings.Contains(cond.Message, want) {
			t.Errorf("condition message %q does not name %q", cond.Message, want)
		}
	}
	if got, _ := c.RetryAt(b.UID); !got.Equal(until) {
		t.Errorf("next attempt at %v; want %v, when the retention ends (not RetryAfter later)", got, until)
	}
	if ok, _ := e.bucket.Exists(e.ctx, keys[1]); ok {
		t.Error("the unlocked object was kept")
	}
	time.Sleep(time.Until(until) + time.Second)
	cfg.Clock.(*clocktesting.FakeClock).SetTime(until.Add(8*retention.Day + time.Second))
	rep = e.pass(c)
	if len(rep.Backups) != 1 || !rep.Backups[0].Deleted {
		t.Fatalf("pass after the retention: %+v; want the backup collected", rep.Backups)
	}
	if _, err := e.get("locked"); !apierrors.IsNotFound(err) {
		t.Errorf("backup resource after collection: %v; want NotFound", err)
	}
}

// With a Finalizer: Prepare adds it; a backup deleted by anyone keeps its
// data for the grace period (GracePeriod condition, OnGrace's deleteAfter,
// and the store's own lifecycle rule as a backstop), then Finalize deletes
// the data, removes the rule and then the finalizer. A dry run reports the
// keys on the backup (DryRun.Report) and deletes nothing. A backup whose
// Location is zero (never written) loses its finalizer without a store.
func TestFinalizerDeletesDataAfterTheGracePeriod(t *testing.T) {
	e := newEnv(t, testenv.BucketOptions{})
	keys := e.backup("b", "db/b/", "minio", nil)
	keep := e.backup("c", "db/c/", "minio", nil)
	// Its Location says it has no data: keys under its prefix are not its.
	stray := e.backup("never-written", "db/never-written/", "minio", nil)
	cfg := e.config(dynObjects{d: e.d})
	cfg.Keep = nil // collected only when deleted
	cfg.Finalizer = &collect.Finalizer[*backup]{Name: "collect.groundskeeper.example.com/data", GracePeriod: time.Hour, Backstop: true,
		OnGrace: func(b *backup, at time.Time) { b.Status.DeleteAfter = &metav1.Time{Time: at} }}
	loc := cfg.Location
	cfg.Location = func(ctx context.Context, b *backup) (collect.Location, error) {
		if b.Name == "never-written" {
			return collect.Location{}, nil
		}
		l, err := loc(ctx, b)
		l.SecretNamespace = e.k.Namespace
		return l, err
	}
	c := e.collector(cfg)
	for _, n := range []string{"b", "never-written"} {
		e.prepareAndDelete(c, n)
	}
	if rep := e.pass(c); len(rep.Backups) != 0 {
		t.Errorf("a pass without a policy acted: %+v", rep.Backups)
	}
	b, err := e.get("b")
	if err != nil || b.DeletionTimestamp == nil {
		t.Fatalf("backup b after delete: %+v, %v; want it held by the finalizer", b, err)
	}
	e.clk.SetTime(b.DeletionTimestamp.Time.Add(time.Minute))
	out, after, err := c.Finalize(e.ctx, b)
	if err != nil || out.Reason != collect.ReasonGracePeriod || after != 59*time.Minute {
		t.Fatalf("Finalize in the grace period: %+v, %s, %v; want GracePeriod, 59m", out, after, err)
	}
	e.wantKeys(keys, keep, stray)
	b, _ = e.get("b")
	deleteAt := b.DeletionTimestamp.Time.Add(time.Hour)
	if b.Status.DeleteAfter == nil || !b.Status.DeleteAfter.Time.Equal(deleteAt) {
		t.Errorf("status.deleteAfter %v, want %s (OnGrace)", b.Status.DeleteAfter, deleteAt)
	}
	backstop := "groundskeeper/expire/db/b/"
	if cond := e.condition("b"); cond == nil || cond.Reason != collect.ReasonGracePeriod || !strings.Contains(cond.Message, backstop) {
		t.Errorf("condition %+v, want GracePeriod naming the backstop rule %s", cond, backstop)
	}
	if !slices.Contains(e.lifecycleRules(), backstop) {
		t.Errorf("lifecycle rules %v, want %s", e.lifecycleRules(), backstop)
	}

	e.clk.Step(time.Hour)
	dry := cfg
	dry.DryRun = collect.DryRun{Enabled: true, Report: true}
	out, _, err = e.collector(dry).Finalize(e.ctx, b)
	if err != nil || !out.Deleted || !slices.Equal(slices.Sorted(slices.Values(out.Keys)), slices.Sorted(slices.Values(keys))) {
		t.Fatalf("dry run Finalize: %+v, %v; want keys %v", out, err, keys)
	}
	e.wantKeys(keys, keep, stray)
	if cond := e.condition("b"); cond == nil || cond.Reason != collect.ReasonDryRun || !strings.Contains(cond.Message, "would delete 2 objects") {
		t.Errorf("condition after the dry run %+v, want DryRun saying what would go", cond)
	}
	if b, err = e.get("b"); err != nil {
		t.Fatal(err)
	}
	out, _, err = c.Finalize(e.ctx, b)
	if err != nil || !out.Deleted {
		t.Fatalf("Finalize after the grace period: %+v, %v", out, err)
	}
	e.wantKeys(keep, stray)
	if _, err := e.get("b"); !apierrors.IsNotFound(err) {
		t.Errorf("backup b: %v, want NotFound once its finalizer is removed", err)
	}
	if slices.Contains(e.lifecycleRules(), backstop) {
		t.Errorf("backstop rule %s left after the data was deleted", backstop)
	}
	nw, err := e.get("never-written")
	if err != nil {
		t.Fatal(err)
	}
	if out, _, err := c.Finalize(e.ctx, nw); err != nil || !out.Deleted {
		t.Fatalf("Finalize of a backup without data: %+v, %v", out, err)
	}
	if _, err := e.get("never-written"); !apierrors.IsNotFound(err) {
		t.Errorf("backup never-written: %v, want NotFound", err)
	}
}

// The store's backstop rule deletes everything under a prefix with no
// controller to ask: it is not installed for a deleted backup whose prefix
// holds another backup's data (nested, or a marker of another owner), and
// one installed before the neighbour came is taken back at the next look.
func TestBackstopNeverExpiresAnothersData(t *testing.T) {
	e := newEnv(t, testenv.BucketOptions{})
	outer := e.backup("outer", "db/", "minio", nil)
	owned := e.backup("owned", "own/", "minio", nil)
	if err := backupstore.WriteMarker(e.ctx, e.bucket, "own/marker", "another-uid", nil); err != nil {
		t.Fatal(err)
	}
	cfg := e.config(dynObjects{d: e.d})
	cfg.Keep = nil
	cfg.Finalizer = &collect.Finalizer[*backup]{Name: "collect.groundskeeper.example.com/data", GracePeriod: time.Hour, Backstop: true}
	loc := cfg.Location
	cfg.Location = func(ctx context.Context, b *backup) (collect.Location, error) {
		l, err := loc(ctx, b)
		if b.Name == "owned" {
			l.Owner, l.Marker = string(b.UID), "marker"
		}
		return l, err
	}
	c := e.collector(cfg)
	e.prepareAndDelete(c, "outer")
	e.prepareAndDelete(c, "owned")
	b, err := e.get("outer")
	if err != nil {
		t.Fatal(err)
	}
	if out, _, err := c.Finalize(e.ctx, b); err != nil || out.Reason != collect.ReasonGracePeriod {
		t.Fatalf("Finalize in the grace period: %+v, %v", out, err)
	}
	if !slices.Contains(e.lifecycleRules(), "groundskeeper/expire/db/") {
		t.Fatalf("lifecycle rules %v: want the backstop of db/ while nothing else is under it", e.lifecycleRules())
	}
	// A backup of another namespace comes, with its data under db/.
	inner := e.backup("inner", "db/inner/", "minio", nil)
	if b, err = e.get("outer"); err != nil {
		t.Fatal(err)
	}
	if out, _, err := c.Finalize(e.ctx, b); err != nil || out.Reason != collect.ReasonGracePeriod || !strings.Contains(out.Message, "no backstop") {
		t.Fatalf("Finalize with a nested neighbour: %+v, %v; want GracePeriod without a backstop", out, err)
	}
	o, err := e.get("owned")
	if err != nil {
		t.Fatal(err)
	}
	if out, _, err := c.Finalize(e.ctx, o); err != nil || !strings.Contains(out.Message, "another owner") {
		t.Fatalf("Finalize of a prefix marked by another owner: %+v, %v; want no backstop, naming the other owner", out, err)
	}
	if rules := e.lifecycleRules(); len(rules) != 0 {
		t.Errorf("lifecycle rules %v; want none: each prefix holds data that is not the deleted backup's", rules)
	}
	e.clk.Step(2 * time.Hour)
	for _, name := range []string{"outer", "owned"} {
		b, err := e.get(name)
		if err != nil {
			t.Fatal(err)
		}
		if out, _, _ := c.Finalize(e.ctx, b); out.Deleted {
			t.Errorf("Finalize of %s after the grace period deleted it: %+v", name, out)
		}
	}
	e.wantKeys(outer, inner, owned, []string{"own/marker"})
}

// prepareAndDelete adds c's finalizer to backup name and deletes it: the
// finalizer holds it.
func (e *env) prepareAndDelete(c *collect.Collector[*backup], name string) {
	e.t.Helper()
	b, err := e.get(name)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := c.Prepare(e.ctx, b); err != nil {
		e.t.Fatal(err)
	}
	if err := e.d.Resource(testbackup.Resource).Namespace(e.k.Namespace).Delete(e.ctx, name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// lifecycleRules returns the IDs of the bucket's lifecycle rules.
func (e *env) lifecycleRules() []string {
	e.t.Helper()
	var s3c *s3.Client
	if !e.bucket.As(&s3c) {
		e.t.Fatal("not an S3 bucket")
	}
	out, err := s3c.GetBucketLifecycleConfiguration(e.ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: aws.String(e.store.Bucket)})
	if err != nil {
		return nil // no configuration
	}
	var ids []string
	for _, r := range out.Rules {
		ids = append(ids, aws.ToString(r.ID))
	}
	return ids
}

// A retention pass with a Finalizer: a dry run lists the keys Finalize
// would delete; the real pass deletes the resource with its preconditions
// and leaves the data to the finalizer, which deletes it, then lets the
// resource go.
func TestPassWithAFinalizer(t *testing.T) {
	e := newEnv(t, testenv.BucketOptions{})
	keys := e.backup("b", "db/b/", "minio", nil)
	cfg := e.config(dynObjects{d: e.d})
	cfg.Finalizer = &collect.Finalizer[*backup]{Name: "collect.groundskeeper.example.com/data"}
	c := e.collector(cfg)
	b, err := e.get("b")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Prepare(e.ctx, b); err != nil {
		t.Fatal(err)
	}
	e.clk.Step(8 * retention.Day)
	dry := cfg
	dry.DryRun.Enabled = true
	rep := e.pass(e.collector(dry))
	if len(rep.Backups) != 1 || !rep.Backups[0].Deleted || !slices.Equal(slices.Sorted(slices.Values(rep.Backups[0].Keys)), slices.Sorted(slices.Values(keys))) {
		t.Fatalf("dry run: %+v, want b with keys %v", rep.Backups, keys)
	}
	if b, err := e.get("b"); err != nil || b.DeletionTimestamp != nil {
		t.Fatalf("dry run touched the resource: %+v, %v", b, err)
	}
	rep = e.pass(c)
	if len(rep.Backups) != 1 || !rep.Backups[0].Deleted {
		t.Fatalf("pass: %+v, want b deleted", rep.Backups)
	}
	e.wantKeys(keys) // the finalizer's job
	b, err = e.get("b")
	if err != nil || b.DeletionTimestamp == nil {
		t.Fatalf("after the pass: %+v, %v; want b held by its finalizer", b, err)
	}
	if out, _, err := c.Finalize(e.ctx, b); err != nil || !out.Deleted {
		t.Fatalf("Finalize: %+v, %v", out, err)
	}
	e.wantKeys()
	if _, err := e.get("b"); !apierrors.IsNotFound(err) {
		t.Errorf("b: %v, want NotFound", err)
	}
}

// A backup whose Location says its bucket may be missing (an entry placed
// in a pool's bucket not made in the store yet) is finalized with nothing
// deleted when the bucket does not exist, and its data is deleted as
// usual when it does; without that word, a bucket that does not exist
// keeps the backup (a wrong URL must not drop the record of the data).
func TestFinalizeWhenTheBucketMayBeMissing(t *testing.T) {
	e := newEnv(t, testenv.BucketOptions{})
	missing := "never-made-" + e.store.Bucket[:min(len(e.store.Bucket), 40)]
	elsewhere := slices.Concat(
		e.backup("placed", "db/placed/", "minio", func(b *backup) { b.Spec.Bucket = missing }),
		e.backup("misnamed", "db/misnamed/", "minio", func(b *backup) { b.Spec.Bucket = missing }))
	keys := e.backup("placed-made", "db/placed-made/", "minio", nil)
	cfg := e.config(dynObjects{d: e.d})
	cfg.Keep = nil
	cfg.Finalizer = &collect.Finalizer[*backup]{Name: "collect.groundskeeper.example.com/data"}
	loc := cfg.Location
	cfg.Location = func(ctx context.Context, b *backup) (collect.Location, error) {
		l, err := loc(ctx, b)
		l.SecretNamespace = e.k.Namespace
		l.BucketMayBeMissing = b.Name != "misnamed"
		return l, err
	}
	c := e.collector(cfg)
	for _, n := range []string{"placed", "misnamed", "placed-made"} {
		e.prepareAndDelete(c, n)
		b, err := e.get(n)
		if err != nil {
			t.Fatal(err)
		}
		e.clk.SetTime(b.DeletionTimestamp.Time.Add(time.Second)) // no grace period
		out, _, err := c.Finalize(e.ctx, b)
		t.Logf("%s: %+v, %v", n, out, err)
	}
	if _, err := e.get("placed"); !apierrors.IsNotFound(err) {
		t.Errorf("placed, its bucket never made: %v; want it gone", err)
	}
	if _, err := e.get("placed-made"); !apierrors.IsNotFound(err) {
		t.Errorf("placed-made, its bucket there: %v; want it gone with its data", err)
	}
	if b, err := e.get("misnamed"); err != nil || b.DeletionTimestamp == nil || len(b.Finalizers) == 0 {
		t.Errorf("misnamed, its bucket missing: %+v, %v; want it kept by its finalizer", b, err)
	}
	if cond := e.condition("misnamed"); cond == nil || cond.Reason != collect.ReasonDeletionFailed || !strings.Contains(cond.Message, missing) {
		t.Errorf("misnamed: condition %+v; want DeletionFailed naming %s", cond, missing)
	}
	// The keys of the two backups of the missing bucket, written to the
	// test's bucket under their prefixes, are not theirs: untouched.
	e.wantKeys(elsewhere)
	if len(keys) != 2 {
		t.Fatalf("placed-made had %d keys", len(keys))
	}
}

// A prefix whose marker names another owner keeps the backup (NotOwner)
// and nothing is deleted; with NoDataUnlessOwner (a prefix that may never
// have been the backup's: an entry refused before it was admitted) the
// backup goes, and the other's data stays all the same.
func TestAPrefixNeverGivenToTheBackupIsNoData(t *testing.T) {
	e := newEnv(t, testenv.BucketOptions{})
	for _, name := range []string{"kept", "never-given"} {
		e.backup(name, name+"/", "minio", nil)
	}
	theirs := []string{"kept/.owner", "never-given/.owner"}
	for _, key := range theirs {
		if err := backupstore.WriteMarker(e.ctx, e.bucket, key, "another-uid", nil); err != nil {
			t.Fatal(err)
		}
	}
	cfg := e.config(dynObjects{d: e.d})
	cfg.Keep = nil
	cfg.Finalizer = &collect.Finalizer[*backup]{Name: "collect.groundskeeper.example.com/data"}
	loc := cfg.Location
	cfg.Location = func(ctx context.Context, b *backup) (collect.Location, error) {
		l, err := loc(ctx, b)
		l.Owner, l.Marker, l.NoDataUnlessOwner = string(b.UID), ".owner", b.Name == "never-given"
		return l, err
	}
	c := e.collector(cfg)
	before := e.keys()
	for _, name := range []string{"kept", "never-given"} {
		e.prepareAndDelete(c, name)
		// The deletionTimestamp is the API server's, in whole seconds:
		// the collector's clock must be past it (no grace period).
		e.clk.Step(time.Minute)
		b, err := e.get(name)
		if err != nil {
			t.Fatal(err)
		}
		out, _, err := c.Finalize(e.ctx, b)
		switch name {
		case "kept":
			if out.Deleted || out.Reason != collect.ReasonNotOwner || err == nil {
				t.Errorf("Finalize of a backup whose prefix's marker names another owner: %+v, %v; want it kept (NotOwner)", out, err)
			}
		case "never-given":
			if err != nil {
				t.Fatalf("Finalize %s: %v", name, err)
			}
			if !out.Deleted || !strings.Contains(out.Message, "no data to delete") {
				t.Errorf("Finalize of a backup whose prefix was never given to it: %+v; want it gone with no data deleted", out)
			}
			if _, err := e.get(name); !apierrors.IsNotFound(err) {
				t.Errorf("backup %s: %v; want NotFound", name, err)
			}
		}
	}
	if after := e.keys(); !slices.Equal(before, after) {
		t.Errorf("the store changed: before %v, after %v; want every object kept (none is either backup's)", before, after)
	}
}
