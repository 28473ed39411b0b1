// Package locks wires locking (the global operator lock) on a
// controller-runtime manager: ConfigMaps is the client of kubelock, the
// backend that keeps the lock in a ConfigMap, over the manager's client
// and API reader.
//
//	backend, err := kubelock.New(kubelock.Config{
//		Client:    locks.ConfigMaps(mgr.GetClient(), mgr.GetAPIReader()),
//		Namespace: ns,
//		Name:      "my-operator-lock",
//	})
//
// # Guarantees
//
//   - The lock's ConfigMap is read through the API reader, never the
//     manager's cache: kubelock's transactions start from a read of the API
//     server; writes go through the manager's client.
//   - Errors keep their type, so kubelock's conflict and not-found
//     handling works on them; the backend passes locking's conformance
//     suite (locking/locktest) through it on a real API server.
//
// None of the example operators uses it (fdb-lock opens its lock by URL,
// whose configmap:// backend takes a clientset; locking.Open's
// kubelock.Opener takes this client too).
package locks
