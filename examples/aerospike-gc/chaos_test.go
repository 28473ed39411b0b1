package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/groundskeeper-io/groundskeeper/examples/internal/chaos"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/testenv"
	"github.com/groundskeeper-io/groundskeeper/testenv/faultproxy"
)

// shortSeed is the seed of the short run; CHAOS_SEED replays another.
const shortSeed = 14

// TestChaos runs the aerospike-gc workload on a control plane and a MinIO
// of its own, with two fake nodes where the pods run and take their grace
// period (2 s) to die, while their components restart, the replicas'
// connections fail, replicas are killed and a node stops answering for a
// while, then checks the invariants (see internal/chaos). Without CHAOS_DURATION it is the short run, 60 s of
// faults from a fixed seed, which make test runs; make chaos sets
// CHAOS_DURATION (and a random seed unless CHAOS_SEED is set).
func TestChaos(t *testing.T) {
	seed, duration := chaos.Plan(t, shortSeed)

	k := testenv.StartIsolatedKubernetes(t)
	installCRD(t, k.Config)
	nodes := k.StartNodes(t, &testenv.NodeOptions{Count: 2})
	// A volume per claim (a released volume is never bound again): the
	// workload makes about 70 claims a minute.
	pool := k.NewVolumePool(t, &testenv.VolumeOptions{Count: 50 + 100*int(duration/time.Minute+1)})
	s3 := testenv.StartIsolatedS3(t, testenv.BucketOptions{})
	minio := faultproxy.Start(t, strings.TrimPrefix(s3.Endpoint, "http://"))
	replicaProxies, replicaConfig := chaos.ReplicaProxies(t, k, 2)
	world := gcWorld{
		direct: k.Config, ns: k.Namespace, bucket: s3.Bucket, store: s3.Open(t), auditLog: k.AuditLog,
		replicaConfig: replicaConfig, storageClass: pool.StorageClass, podGrace: 2,
	}
	log, logPath, err := chaos.FileLogger(t, "aerospike-gc", seed)
	if err != nil {
		t.Fatal(err)
	}
	// client-go's own goroutines (event broadcasters) log through klog
	// after the test returns: the logger is set for the rest of the
	// process, never cleared, which would race with them.
	klog.SetLogger(log.WithName("klog"))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The bound: a leader killed just before the faults stop keeps its
	// Lease for 15 s, then a pass, a retry after a failed deletion (2 s)
	// and the pvc-protection finalizer; doubled for a loaded machine.
	// The replicas are processes of the example's binary, as main wires
	// it, with the flags runManager gives the in-process ones.
	process := &chaos.Process{Binary: chaos.Build(t, "."), Dir: t.TempDir(), Log: log,
		Args: func(_ int, kubeconfig string) []string {
			return []string{"--kubeconfig=" + kubeconfig, "--namespace=" + k.Namespace, "--leader-elect",
				"--metrics-bind-address=0", "--health-probe-bind-address=0", "--zap-log-level=1", "--zap-devel",
				"--retry-interval=2s", "--claim-selector=app=aerospike"}
		}}
	// A replica's delete request may be held by a fault for up to the
	// schedule's longest hold (12 s), or wait out an API server restart:
	// the checker judges a replica's deletion against the pods created
	// 15 s before it or earlier (the generator's CheckReuse deletions
	// against every pod created before them; see check).
	g, err := newGCWorkload(ctx, world, gcOptions{bound: 60 * time.Second, process: process, log: log, mountRace: 15 * time.Second},
		seed, "http://"+minio.Addr())
	if err != nil {
		t.Fatal(err)
	}
	// A client's connections: to the API server for each replica, and to
	// the store (shared: the endpoint is in the backups' Secret).
	clients := []*faultproxy.Proxy{replicaProxies[0], replicaProxies[1], minio}
	all := append(clients[:3:3], k.EtcdProxy)
	faults := append(chaos.ControlPlaneFaults(k), chaos.Restart("restart minio", s3.Server), chaos.KillReplica(g.replicas))
	faults = append(faults, chaos.ConnectionFaults(clients, all)...)
	faults = append(faults, chaos.NodeStops(nodes))
	res := runGC(ctx, t, g, chaos.Config{
		Name: "aerospike-gc", Seed: seed, Duration: duration, Faults: faults,
		Schedule:      &chaos.ScheduleOptions{MinGap: 2 * time.Second, MaxGap: 6 * time.Second, MinHold: time.Second, MaxHold: 12 * time.Second},
		SettleTimeout: 90 * time.Second,
	})
	chaos.Report(t, res, logPath)
	if res.Ops["observed: backups deleted"] == 0 || res.Ops["observed: claims deleted"] == 0 {
		t.Errorf("the collectors deleted nothing: the run proves nothing\n%s", res.Table())
	}
	if res.Faults["node stops answering"] == 0 {
		t.Errorf("no node stopped answering: the run proves nothing about pods that may still run\n%s", res.Table())
	}
	if res.Ops["foreign pod mounts a claim"] == 0 {
		t.Errorf("no foreign pod mounted a claim: the run proves nothing about them\n%s", res.Table())
	}
	n := 0
	for _, v := range []lifecycle.Verdict{lifecycle.VerdictWait, lifecycle.VerdictDeleteFirst, lifecycle.VerdictReuse, lifecycle.VerdictCreate} {
		n += res.Ops["reuse check, mark expired, a foreign pod mounts the claim: "+v.String()]
	}
	if n == 0 {
		t.Errorf("no reuse check on an expired claim a foreign pod mounts: the run proves nothing about CheckReuse's rule\n%s", res.Table())
	}
}

// runGC runs the workload g under cfg's faults with its replicas, which
// keep running while the system settles and stop when the run is over.
func runGC(ctx context.Context, t *testing.T, g *gcWorkload, cfg chaos.Config) *chaos.Result {
	cfg.Replicas, cfg.Workload, cfg.Settled, cfg.Check = g.replicas, g.generate, g.settled, g.check
	cfg.Observed, cfg.Logf = g.observed, t.Logf
	return chaos.Run(ctx, cfg)
}

// offsetClock is the real clock shifted by offset: a collector whose clock
// is wrong, a planted bug.
type offsetClock struct {
	clock.RealClock
	offset time.Duration
}

func (c offsetClock) Now() time.Time                  { return time.Now().Add(c.offset) }
func (c offsetClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// siblingDeletingStore is an S3 endpoint in front of MinIO that, after
// each delete it passes on, deletes one more key: the first decoy beside
// a backup's prefix that is left. A planted bug of the store layer.
func siblingDeletingStore(t *testing.T, endpoint string, bucket *blob.Bucket, prefix string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rp.ServeHTTP(w, r)
		if r.Method != http.MethodDelete && !(r.Method == http.MethodPost && r.URL.Query().Has("delete")) {
			return
		}
		iter := bucket.List(&blob.ListOptions{Prefix: prefix})
		for {
			o, err := iter.Next(r.Context())
			if errors.Is(err, io.EOF) || err != nil {
				return
			}
			if strings.HasSuffix(o.Key, ".log") {
				_ = bucket.Delete(r.Context(), o.Key)
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// operatorPodsOnly is the replicas' API server config with a planted
// bug: their pod lists and watches select app=aerospike, the label of the
// operator's pods, so the collector never sees a pod someone else made
// mount a claim (as a mount check given the operator's pod selector
// would).
func operatorPodsOnly(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/pods") {
				r = r.Clone(r.Context())
				q := r.URL.Query()
				q.Set("labelSelector", "app=aerospike")
				r.URL.RawQuery = q.Encode()
			}
			return rt.RoundTrip(r)
		})
	})
	return cfg
}

// terminatingPodsGone is the replicas' API server config with a planted
// bug: a pod being deleted is gone to them (their watches report it
// deleted, their lists leave it out), so the collector marks a claim
// unmounted as soon as its pod's deletion starts, and deletes it a TTL
// later even while the pod still runs: on a node that stopped answering,
// for as long as it does not answer.
func terminatingPodsGone(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/pods") {
				return rt.RoundTrip(r)
			}
			r = r.Clone(r.Context())
			r.Header.Set("Accept", "application/json") // what the rewrite reads
			resp, err := rt.RoundTrip(r)
			if err != nil || resp.StatusCode != http.StatusOK {
				return resp, err
			}
			body := resp.Body
			pr, pw := io.Pipe()
			resp.Body, resp.ContentLength = pr, -1
			resp.Header.Del("Content-Length")
			watching := r.URL.Query().Get("watch") == "true"
			go func() {
				defer body.Close()
				dec, enc := json.NewDecoder(body), json.NewEncoder(pw)
				for {
					var v map[string]any
					if err := dec.Decode(&v); err != nil {
						pw.CloseWithError(err)
						return
					}
					if watching {
						if obj, ok := v["object"].(map[string]any); ok && terminating(obj) && v["type"] != "BOOKMARK" {
							v["type"] = "DELETED"
						}
					} else if items, ok := v["items"].([]any); ok {
						kept := items[:0]
						for _, it := range items {
							if obj, ok := it.(map[string]any); !ok || !terminating(obj) {
								kept = append(kept, it)
							}
						}
						v["items"] = kept
					}
					if err := enc.Encode(v); err != nil {
						pw.CloseWithError(err)
						return
					}
				}
			}()
			return resp, nil
		})
	})
	return cfg
}

// terminating reports whether the JSON object has a deletionTimestamp.
func terminating(obj map[string]any) bool {
	meta, _ := obj["metadata"].(map[string]any)
	_, ok := meta["deletionTimestamp"]
	return ok
}

// markOnly wraps the lifecycle client of the generator's CheckReuse calls
// with a planted bug: its pod lists are empty, so CheckReuse decides on
// the claim's last-unmounted-on mark alone (as it did before issue 23).
type markOnly struct{ lifecycle.Client }

func (markOnly) ListPods(context.Context, string, metav1.ListOptions) (*corev1.PodList, error) {
	return &corev1.PodList{}, nil
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Each invariant catches a planted bug: the workload runs without faults
// on the shared control plane, with a collector broken by a test-only
// wrapper, and the checker must report the invariant.
func TestChaosCheckerCatchesPlantedBugs(t *testing.T) {
	for _, tc := range []struct {
		name     string
		isolated bool
		clock    clock.WithTicker
		store    bool
		// operatorPodsOnly hides the foreign pods from the collector; the
		// run is 30 s rather than 15, so that some claims expire while a
		// foreign pod mounts them.
		operatorPodsOnly bool
		// markOnly makes the generator's CheckReuse decide on the mark
		// alone; the run is 30 s, and the replicas' deletions are judged
		// with TestChaos's race bound, so that only the judgement of
		// CheckReuse's own deletions (race 0) can catch it.
		markOnly bool
		// onNodes runs the pods on two fake nodes, a node stopping
		// answering every few seconds, for 30 s; terminatingGone makes a
		// pod being deleted gone to the collector.
		onNodes, terminatingGone bool
		want                     []string
	}{
		// On a control plane of its own, whose audit log records the
		// deletions: the other two use the shared one and the watches.
		{name: "collector clock an hour ahead", isolated: true, clock: offsetClock{offset: time.Hour}, want: []string{invSafety, invKept}},
		{name: "store deletes a sibling key with each delete", store: true, want: []string{invSafety, invKept}},
		{name: "collector clock an hour behind", clock: offsetClock{offset: -time.Hour}, want: []string{invLiveness}},
		{name: "collector sees only the operator's pods", operatorPodsOnly: true, want: []string{invMounted}},
		{name: "reuse check decides on the mark alone", isolated: true, markOnly: true, want: []string{invMounted}},
		// Pods on nodes take their grace period (2 s) to die, shorter than
		// any claim's TTL: only the node that stops answering keeps one
		// running past it.
		{name: "collector takes a terminating pod for gone, a node stops answering", onNodes: true, terminatingGone: true, want: []string{invMounted}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var k *testenv.Kubernetes
			var auditLog string
			if tc.isolated {
				ik := testenv.StartIsolatedKubernetes(t)
				k, auditLog = &ik.Kubernetes, ik.AuditLog
			} else {
				k = testenv.StartKubernetes(t)
			}
			installCRD(t, k.Config)
			var faults []chaos.Fault
			var schedule *chaos.ScheduleOptions
			var storageClass string
			if tc.onNodes {
				faults = []chaos.Fault{chaos.NodeStops(k.StartNodes(t, &testenv.NodeOptions{Count: 2}))}
				schedule = &chaos.ScheduleOptions{MinGap: 3 * time.Second, MaxGap: 5 * time.Second}
				storageClass = k.NewVolumePool(t, &testenv.VolumeOptions{Count: 100}).StorageClass
			}
			s3 := testenv.S3(t)
			store := s3.Open(t)
			replicaConfig := k.Config
			if tc.operatorPodsOnly {
				replicaConfig = operatorPodsOnly(k.Config)
			}
			if tc.terminatingGone {
				replicaConfig = terminatingPodsGone(k.Config)
			}
			world := gcWorld{
				direct: k.Config, ns: k.Namespace, bucket: s3.Bucket, store: store, auditLog: auditLog,
				replicaConfig: func(int) (*rest.Config, *faultproxy.Proxy) { return replicaConfig, nil },
				storageClass:  storageClass,
			}
			if tc.onNodes {
				world.podGrace = 2
			}
			endpoint := s3.Endpoint
			if tc.store {
				endpoint = siblingDeletingStore(t, s3.Endpoint, store, "backups/"+k.Namespace+"/")
			}
			log, logPath, err := chaos.FileLogger(t, "aerospike-gc", shortSeed)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// No faults: a deletion decided before a pod was created
			// reaches the API server within a second (the watch's
			// deletionTimestamp is in seconds).
			o := gcOptions{clock: tc.clock, bound: 15 * time.Second, log: log, mountRace: time.Second}
			if tc.markOnly {
				o.mountRace = 15 * time.Second
				o.reuseClient = func(c lifecycle.Client) lifecycle.Client { return markOnly{c} }
			}
			g, err := newGCWorkload(ctx, world, o, shortSeed, endpoint)
			if err != nil {
				t.Fatal(err)
			}
			duration := 15 * time.Second
			if tc.operatorPodsOnly || tc.markOnly || tc.onNodes {
				duration = 30 * time.Second
			}
			res := runGC(ctx, t, g, chaos.Config{Name: "aerospike-gc planted: " + tc.name, Seed: shortSeed,
				Duration: duration, SettleTimeout: 25 * time.Second, Faults: faults, Schedule: schedule})
			t.Logf("replica log: %s\n%s", logPath, res.Table())
			found := map[string]int{}
			for _, v := range res.Violations {
				found[v.Invariant]++
			}
			for _, inv := range tc.want {
				if found[inv] == 0 {
					t.Errorf("the checker did not report %q for the planted bug %q; it reported %v", inv, tc.name, found)
				}
			}
		})
	}
}
