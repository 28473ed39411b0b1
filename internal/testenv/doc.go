// Package testenv starts real components for groundskeeper's tests, on free
// loopback ports: etcd, kube-apiserver and kube-controller-manager, MinIO
// (S3), fake-gcs-server (GCS) and Azurite (Azure Blob), plus file and memory
// buckets. A mock answers what its author believed; these answer what the
// real thing does.
//
// Guarantees:
//
//   - Each component starts lazily, at most once per test binary (one per
//     `go test` package process), and is shared by the package's tests.
//   - Each test gets its own namespace ([StartKubernetes]), etcd key prefix
//     ([StartEtcd]) or bucket ([S3], [GCS], [Azure], [File], [Mem]).
//   - The controller manager runs the controllers in [Controllers], so owner
//     reference cascades, the PVC protection finalizer, the StatefulSet claim
//     retention policy and namespace deletion behave as in a cluster.
//   - The control plane authenticates a static admin token and authorizes
//     everything; its kubeconfig file is in [Kubernetes.Kubeconfig].
//   - A component that cannot start fails the test with an error that names it
//     and shows the tail of its log.
//   - A component whose binary has not been built skips the test with a
//     message that says to run `make testenv`, except when CI=true, where it
//     fails the test.
//   - [Main] stops every component and removes its data when the package's
//     tests end; components also die with the test binary if it crashes.
//
// Not provided: a kubelet or scheduler (pods stay Pending and unscheduled,
// claims stay unbound; deleting an unscheduled pod is immediate), admission
// webhooks, or isolation between tests beyond namespaces, prefixes and
// buckets.
//
// # Binaries
//
// `make testenv` (hack/testenv.sh) builds the components from pinned
// versions into a cache outside the clone and links them into .cache/bin at
// the module root, where this package finds them; [BinDirEnv] overrides the
// directory.
//
// # Object store credentials
//
// The stores' URLs are gocloud URLs. Starting a store sets, once, the
// process environment variables that gocloud's URL openers read:
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_REGION for MinIO,
// STORAGE_EMULATOR_HOST for fake-gcs-server, AZURE_STORAGE_ACCOUNT and
// AZURE_STORAGE_KEY for Azurite. The credentials are also exported as
// constants for code that passes them explicitly.
package testenv
