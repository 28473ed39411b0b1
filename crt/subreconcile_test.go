package crt_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/groundskeeper-io/groundskeeper/crt"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/subreconcile"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// A subreconcile chain over pods (whose status a test may write: there is
// no kubelet) as a controller-runtime Reconciler on the real API server.
func TestReconcilerRunsTheChain(t *testing.T) {
	env := testenv.StartKubernetes(t)
	ctx := context.Background()
	c, err := client.New(env.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	pods := env.Client.CoreV1().Pods(env.Namespace)
	for _, name := range []string{"ok", "bad", "raced"} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "db", Image: "db:1"}}}}
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mark := subreconcile.NamedFunc("Mark", func(ctx context.Context, p *corev1.Pod, loop subreconcile.Loop[struct{}]) *subreconcile.Requeue {
		switch p.Name {
		case "bad":
			return subreconcile.RequeueOnError(fmt.Errorf("pod %s: %w", p.Name, lifecycle.ErrInvalidPolicy))
		case "raced":
			// Someone else writes the pod between our read and our write.
			fresh, err := pods.Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return subreconcile.RequeueOnError(err)
			}
			fresh.Labels = map[string]string{"touched": "yes"}
			if _, err := pods.Update(ctx, fresh, metav1.UpdateOptions{}); err != nil {
				return subreconcile.RequeueOnError(err)
			}
		}
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: "example.com/Marked", Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.Now()})
		loop.Acted("marked")
		return subreconcile.RequeueAfter(30*time.Second, "look again later")
	})
	runner, err := subreconcile.New(subreconcile.Config[*corev1.Pod, struct{}]{Name: "Pod", Steps: []subreconcile.Named[*corev1.Pod, struct{}]{mark}})
	if err != nil {
		t.Fatal(err)
	}
	r := crt.Reconciler[*corev1.Pod, struct{}]{Client: c, Runner: runner, New: func() *corev1.Pod { return new(corev1.Pod) }}
	req := func(name string) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: env.Namespace, Name: name}}
	}

	res, err := r.Reconcile(ctx, req("ok"))
	if err != nil || res.RequeueAfter != 30*time.Second {
		t.Errorf("ok: %+v, %v; want a requeue after 30s", res, err)
	}
	got, err := pods.Get(ctx, "ok", metav1.GetOptions{})
	if err != nil || len(got.Status.Conditions) == 0 || got.Status.Conditions[len(got.Status.Conditions)-1].Type != "example.com/Marked" {
		t.Errorf("ok: status not written: %+v, %v", got.Status.Conditions, err)
	}

	_, err = r.Reconcile(ctx, req("bad"))
	if !errors.Is(err, reconcile.TerminalError(nil)) || !errors.Is(err, lifecycle.ErrInvalidPolicy) {
		t.Errorf("bad: %v; want a reconcile.TerminalError wrapping lifecycle.ErrInvalidPolicy", err)
	}

	res, err = r.Reconcile(ctx, req("raced"))
	if err != nil || res.RequeueAfter != subreconcile.DefaultConflictDelay {
		t.Errorf("raced: %+v, %v; want a requeue after %s and no error", res, err, subreconcile.DefaultConflictDelay)
	}

	if res, err := r.Reconcile(ctx, req("absent")); err != nil || res != (reconcile.Result{}) {
		t.Errorf("absent: %+v, %v; want nothing", res, err)
	}
}

// A Reconciler set up on a started manager reconciles the objects of its
// kind as they come: its step marks a pod, and the mark reaches the API
// server through the status write the Reconciler makes after the chain.
func TestReconcilerOnAManager(t *testing.T) {
	env := testenv.StartKubernetes(t)
	ctx := t.Context()
	const marked = corev1.PodConditionType("example.com/Marked")
	isMarked := func(p *corev1.Pod) bool {
		return slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == marked })
	}
	mark := subreconcile.NamedFunc("Mark", func(_ context.Context, p *corev1.Pod, loop subreconcile.Loop[struct{}]) *subreconcile.Requeue {
		if !isMarked(p) {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: marked, Status: corev1.ConditionTrue,
				LastTransitionTime: metav1.Now()})
			loop.Acted("marked")
		}
		return nil
	})
	runner, err := subreconcile.New(subreconcile.Config[*corev1.Pod, struct{}]{Name: "Pod", Steps: []subreconcile.Named[*corev1.Pod, struct{}]{mark}})
	if err != nil {
		t.Fatal(err)
	}
	mgr := env.NewManager(t, scheme.Scheme)
	var watched atomic.Bool
	err = crt.Reconciler[*corev1.Pod, struct{}]{Client: mgr.GetClient(), Runner: runner,
		New:   func() *corev1.Pod { return new(corev1.Pod) },
		Watch: func(b *builder.Builder) *builder.Builder { watched.Store(true); return b },
	}.SetupWithManager(mgr)
	if err != nil {
		t.Fatal(err)
	}
	if !watched.Load() {
		t.Error("SetupWithManager did not call Watch")
	}
	testenv.StartManager(t, mgr)

	pods := env.Client.CoreV1().Pods(env.Namespace)
	w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=db-0"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-0"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "db", Image: "db:1"}}}}
	if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(time.Minute) // a bound on a failing test, not a wait
	for {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch ended before the pod was marked")
			}
			if p, ok := e.Object.(*corev1.Pod); ok && isMarked(p) {
				return
			}
		case <-timeout:
			t.Fatal("the pod was not marked within a minute")
		}
	}
}
