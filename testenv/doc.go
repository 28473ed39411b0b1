// Package testenv starts real components for tests, on free loopback ports,
// for groundskeeper's own tests and for the tests of operators built on it:
// etcd, kube-apiserver, kube-controller-manager and, on demand,
// kube-scheduler with fake nodes whose kubelet is KWOK; MinIO (S3),
// fake-gcs-server (GCS) and Azurite (Azure Blob), plus file and memory
// buckets. A mock answers what its author believed; these answer what the
// real thing does.
//
// Guarantees:
//
//   - Each component starts lazily, at most once per test binary (one per
//     `go test` package process), and is shared by the package's tests;
//     the isolated ones (see Faults) belong to one test and stop with it.
//   - Each test gets its own namespace ([StartKubernetes]), etcd key prefix
//     ([StartEtcd]) or bucket ([S3], [GCS], [Azure], [File], [Mem]).
//   - The controller manager runs the controllers in [Controllers], so owner
//     reference cascades, the PVC protection finalizer and the claims'
//     Unused condition, the StatefulSet claim retention policy, namespace
//     deletion, the binding of claims to volumes, the node lifecycle
//     (NotReady, eviction) and the removal of pods left terminating where
//     no kubelet will finish them behave as in a cluster.
//   - Nodes are opt-in ([Kubernetes.StartNodes]): a test that starts none
//     pays nothing for them, and its pods stay Pending.
//   - The control plane authenticates a static admin token and authorizes
//     everything; its kubeconfig file is in [Kubernetes.Kubeconfig].
//   - A component that cannot start fails the test with an error that names it
//     and shows the tail of its log.
//   - With go test -short, every test that needs a component is skipped:
//     make test runs the unit tests that way at the oldest dependency
//     versions the library supports.
//   - A component whose binary has not been built skips the test with a
//     message that says to run `make testenv`, except when CI=true, where it
//     fails the test.
//   - [Main] stops every component and removes its data when the package's
//     tests end; components also die with the test binary if it crashes,
//     and the next test binary that starts a component removes the data
//     the crashed one left in the temporary directory.
//
// Not provided: containers (a pod on a fake node runs nothing), a
// provisioner (claims bind to the PersistentVolumes of a pool,
// [Kubernetes.NewVolumePool]), admission webhooks, or isolation between
// tests beyond namespaces, prefixes, buckets and each test's own nodes.
//
// # Nodes
//
// [Kubernetes.StartNodes] gives a test fake nodes: kube-scheduler runs in
// the control plane, and one KWOK process (sigs.k8s.io/kwok, Kubernetes
// WithOut Kubelet) per node plays its kubelet, moving pods through their
// life by the Stage files embedded in this package (stages/*.yaml). Pods of
// the test's namespace are scheduled to its nodes and only there; they
// become Running and Ready within a second; a deleted pod stays
// Terminating, its claims mounted, until its deletionTimestamp (its grace
// period), then goes. A claim of a [Kubernetes.NewVolumePool] class binds
// when its first pod is scheduled (WaitForFirstConsumer), or at once with
// VolumeOptions.Immediate. Stop or kill a node's [Node.Kubelet] and the node
// stops answering: after [NodeMonitorGracePeriod] it is NotReady
// (Unknown) and its pods not ready, after [DefaultTolerationSeconds] they
// are evicted, and they stay Terminating until it is started again, as in a
// cluster, where they may still run. Where KWOK forgets a request that
// failed (it retries only refused connections and overloads), a periodic
// sync of the nodes' pods makes it act again, as a kubelet's sync would
// ([SyncAnnotation]). Without nodes nothing of this runs:
// pods stay Pending and unscheduled, and deleting one is immediate.
// [Kubernetes.UseNodes] lets other namespaces (of subtests, say) share a
// test's nodes, when none of them stops one.
//
// # Faults
//
// Shared components must not be restarted under other tests' feet. A test
// that injects faults into the components themselves starts its own:
// [StartIsolatedKubernetes] (etcd, kube-apiserver, kube-controller-manager,
// a fault proxy between the API server and etcd, and with StartNodes a
// kube-scheduler, [Nodes.Scheduler]), [StartIsolatedS3],
// [StartIsolatedGCS] and [StartIsolatedAzure]. Each process is a
// [Component] with Stop (SIGTERM), Start, Restart and Kill (SIGKILL); it
// comes back on the same ports with the same data directory, so clients
// reconnect to the address they had. [StartEtcdCluster] starts a
// multi-member etcd cluster whose members a test kills, wipes
// ([EtcdMember.RemoveData], a lost volume) and starts again with another
// view of the cluster ([EtcdMember.Configure]), as a recovery from a
// permanent loss of quorum does. Faults of the network between a client
// and any component come from testenv/faultproxy (latency, blackhole,
// reset, refusal, one-way drop); [Kubernetes.ConfigVia] routes a client of
// the API server through one. The isolated API server writes an audit log
// of every delete request, its receipt and its response
// ([IsolatedKubernetes.AuditLog]), kept through its restarts: a checker's
// record of what was deleted, and when, that no broken watch can miss. A
// request cut short (its client cut off, or the API server killed) has an
// unknown outcome there.
//
// What survives a restart, as TestObjectStoreRestarts and
// TestControlPlaneFaults show:
//
//   - etcd: everything (its data directory), through Stop and Kill; the API
//     server reconnects by itself and its writes resume.
//   - kube-apiserver: holds no state of its own; clients and informers
//     reconnect and resume their watches. It is started with
//     --shutdown-send-retry-after so that Stop takes about 2 s rather than
//     up to 60 s while watches are open.
//   - kube-controller-manager: holds no state of its own; after a restart
//     it rebuilds its caches and the garbage collector goes on deleting
//     dependents of deleted owners.
//   - kube-scheduler and KWOK: hold no state of their own; a node's KWOK
//     comes back as its kubelet would (see [Node.Kubelet]).
//   - MinIO: buckets, objects and their settings, through Stop and Kill.
//   - fake-gcs-server (isolated only, started with -backend filesystem):
//     buckets and objects, through Stop and Kill. The shared server keeps
//     everything in memory and is never restarted.
//   - Azurite (isolated only, started with --location): containers and
//     blobs survive Stop (SIGTERM saves its database). Kill can lose what
//     was written in the last seconds: Azurite's metadata database
//     (LokiJS) is saved to disk only every few seconds and on shutdown. The
//     shared server keeps everything in memory and is never restarted.
//
// An isolated fake-gcs-server has no gocloud URL: gocloud finds a GCS
// emulator only through the process-wide STORAGE_EMULATOR_HOST, which
// belongs to the shared server. Use its Endpoint (the JSON API).
//
// # A test of your own operator
//
// A test of a controller-runtime operator gets a manager on the real API
// server from [Kubernetes.NewManager], adds its controllers, and starts it
// with [StartManager]; the garbage collector of the controller manager then
// deletes what owner references say it should, which controller-runtime's
// envtest cannot show:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
//
//	func TestScaleDown(t *testing.T) {
//		env := testenv.StartKubernetes(t)
//		mgr := env.NewManager(t, scheme)
//		if err := setupMyController(mgr); err != nil {
//			t.Fatal(err)
//		}
//		testenv.StartManager(t, mgr)
//		// create objects in env.Namespace through mgr.GetClient() or
//		// env.Client, and wait for what the controller does.
//	}
//
// The manager logs to the test ([Logger]): a reconcile error shows in the
// test's output. Add env.StartNodes(t, nil) for pods that run and take
// their time to die, and env.NewVolumePool(t, nil) for claims that bind
// (name its StorageClass in the claims).
//
// # Binaries
//
// `make testenv` (hack/testenv.sh) in a clone of this repository builds the
// components from pinned versions into a cache outside the clone
// (${XDG_CACHE_HOME:-$HOME/.cache}/groundskeeper) and links them into two
// folders: .cache/bin at the clone's root, where the tests of the
// groundskeeper module find them, and bin in that cache, where the tests of
// any other module find them. [BinDirEnv] overrides both. The tests of
// another module need only the clone's `make testenv` once per machine, and
// binaries of other versions may be linked there instead, though testenv
// is tested only with the pinned ones (Kubernetes 1.37.2, KWOK 0.8.0).
//
// The components keep their data in the system's temporary directory, or
// in the one [DataDirEnv] names: a memory file system there (/dev/shm, as
// make test sets) makes the object stores write two to three times faster.
//
// # Object store credentials
//
// The stores' URLs are gocloud URLs. Starting a store sets, once, the
// process environment variables that gocloud's URL openers read:
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_REGION for MinIO,
// STORAGE_EMULATOR_HOST for fake-gcs-server, AZURE_STORAGE_ACCOUNT and
// AZURE_STORAGE_KEY for Azurite. The credentials are also exported as
// constants for code that passes them explicitly. testenv links no store's
// SDK (it creates buckets with signed HTTP requests of its own) and
// registers the gocloud drivers of file:// and mem:// only: a test that
// opens an s3://, gs:// or azblob:// URL imports the driver, as the code
// it tests does (backupstore/s3store, gcsstore, azurestore), and a test
// that uses only Kubernetes links none.
package testenv
