package crt_test

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/crt"
	"github.com/groundskeeper-io/groundskeeper/subreconcile"
)

// Backup credentials from a Secret, read through the manager's API reader
// (the manager does not start an informer on every Secret).
func ExampleSecrets() {
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{})
	if err != nil {
		panic(err)
	}
	open := func(ctx context.Context, namespace, secret, url string) error {
		creds, err := backupstore.LoadCredentials(ctx, crt.Secrets(mgr.GetAPIReader()), namespace, secret, "s3")
		if err != nil {
			return err // errors.Is(err, backupstore.ErrSecretNotFound): requeue
		}
		bucket, err := backupstore.OpenBucket(ctx, url, creds)
		if err != nil {
			return err
		}
		return bucket.Close()
	}
	_ = open
}

// A subreconcile chain as the controller of its kind: the reconciler reads
// the object from the manager's cache, runs the chain and writes the status
// back when a step changed it.
func ExampleReconciler() {
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{})
	if err != nil {
		panic(err)
	}
	var steps []subreconcile.Named[*corev1.Pod, struct{}] // your steps
	runner, err := subreconcile.New(subreconcile.Config[*corev1.Pod, struct{}]{Name: "Pod", Steps: steps})
	if err != nil {
		panic(err)
	}
	err = crt.Reconciler[*corev1.Pod, struct{}]{
		Client: mgr.GetClient(),
		Runner: runner,
		New:    func() *corev1.Pod { return new(corev1.Pod) },
	}.SetupWithManager(mgr)
	if err != nil {
		panic(err)
	}
	// mgr.Start(ctx) runs it.
}
