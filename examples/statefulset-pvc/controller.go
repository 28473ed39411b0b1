package main

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/groundskeeper-io/groundskeeper/examples/statefulset-pvc/api"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
)

// controllerOptions are the flags of the real controller.
type controllerOptions struct {
	namespace string
	dryRun    bool
	resync    time.Duration
}

// runController reconciles the ReplicatedSets of one namespace until ctx
// ends.
func runController(ctx context.Context, cfg *rest.Config, o controllerOptions) error {
	log := logr.FromContextOrDiscard(ctx)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events(o.namespace)})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "statefulset-pvc"})

	m, err := lifecycle.New(lifecycle.Config{Client: lifecycle.ClientGo(cs.CoreV1()), Recorder: recorder})
	if err != nil {
		return err
	}
	// Pods are ours only with our label; claims are watched in the whole
	// namespace, because KEP-1847 applies the policy to any claim with the
	// name a template gives, pre-provisioned ones included.
	core := informers.NewSharedInformerFactoryWithOptions(cs, o.resync, informers.WithNamespace(o.namespace))
	pods := informers.NewSharedInformerFactoryWithOptions(cs, o.resync, informers.WithNamespace(o.namespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = api.SetLabel }))
	sets := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, o.resync, o.namespace, nil)
	setInformer := sets.ForResource(api.GroupVersionResource)
	podInformer := pods.Core().V1().Pods()
	claimInformer := core.Core().V1().PersistentVolumeClaims()

	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "replicatedsets"})
	enqueueSet := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			queue.Add(key)
		}
	}
	// A pod or claim change wakes the set it belongs to: by the pod's
	// controller reference, by the claim's label.
	enqueueOwner := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		o, ok := obj.(metav1.Object)
		if !ok {
			return
		}
		if ref := metav1.GetControllerOf(o); ref != nil && ref.Kind == api.Kind {
			queue.Add(o.GetNamespace() + "/" + ref.Name)
		} else if name := o.GetLabels()[api.SetLabel]; name != "" {
			queue.Add(o.GetNamespace() + "/" + name)
		}
	}
	for _, h := range []struct {
		inf cache.SharedIndexInformer
		fn  func(any)
	}{{setInformer.Informer(), enqueueSet}, {podInformer.Informer(), enqueueOwner}, {claimInformer.Informer(), enqueueOwner}} {
		if _, err := h.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    h.fn,
			UpdateFunc: func(_, obj any) { h.fn(obj) },
			DeleteFunc: h.fn,
		}); err != nil {
			return err
		}
	}
	r := &reconciler{
		core:   cs.CoreV1(),
		pods:   podInformer.Lister(),
		claims: claimInformer.Lister(),
		m:      m,
		status: dynamicStatus{dyn},
		events: recorder,
		dryRun: o.dryRun,
		clock:  clock.RealClock{},
	}
	core.Start(ctx.Done())
	pods.Start(ctx.Done())
	sets.Start(ctx.Done())
	defer func() {
		queue.ShutDown()
		core.Shutdown()
		pods.Shutdown()
		sets.Shutdown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), setInformer.Informer().HasSynced, podInformer.Informer().HasSynced, claimInformer.Informer().HasSynced) {
		return fmt.Errorf("waiting for the informer caches: %w", ctx.Err())
	}
	go func() {
		<-ctx.Done()
		queue.ShutDown()
	}()
	log.Info("controller started", "namespace", o.namespace, "dryRun", o.dryRun)
	for {
		key, quit := queue.Get()
		if quit {
			return nil
		}
		func() {
			defer queue.Done(key)
			log := log.WithValues("replicatedset", key)
			obj, err := setInformer.Lister().Get(key)
			if err != nil { // deleted: the garbage collector does the rest
				queue.Forget(key)
				return
			}
			set, err := fromUnstructured(obj.(*unstructured.Unstructured))
			if err != nil {
				log.Error(err, "cannot decode")
				queue.Forget(key)
				return
			}
			if err := r.reconcile(logr.NewContext(ctx, log), set); err != nil {
				switch {
				case ctx.Err() != nil:
				case apierrors.IsConflict(err): // the set changed meanwhile: its update is queued too
					log.V(1).Info("set changed during reconcile; retrying", "error", err.Error())
				default:
					log.Error(err, "reconcile failed; retrying")
				}
				queue.AddRateLimited(key)
				return
			}
			queue.Forget(key)
		}()
	}
}

type dynamicStatus struct{ client dynamic.Interface }

func (d dynamicStatus) UpdateStatus(ctx context.Context, set *api.ReplicatedSet) error {
	u, err := toUnstructured(set)
	if err != nil {
		return err
	}
	_, err = d.client.Resource(api.GroupVersionResource).Namespace(set.Namespace).UpdateStatus(ctx, u, metav1.UpdateOptions{})
	return err
}

func fromUnstructured(u *unstructured.Unstructured) (*api.ReplicatedSet, error) {
	var s api.ReplicatedSet
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &s); err != nil {
		return nil, fmt.Errorf("decode %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return &s, nil
}

func toUnstructured(s *api.ReplicatedSet) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
	if err != nil {
		return nil, fmt.Errorf("encode replicatedset %s/%s: %w", s.Namespace, s.Name, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(api.GroupVersionKind)
	return u, nil
}
