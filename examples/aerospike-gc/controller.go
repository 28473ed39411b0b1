package main

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
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

	"github.com/groundskeeper-io/groundskeeper/examples/aerospike-gc/api"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
)

// controllerOptions are the flags of the real controller.
type controllerOptions struct {
	namespace     string
	dryRun        bool
	retryAfter    time.Duration
	claimSelector string
}

// work is one item of the queue: the collection pass (the zero work), or
// marking one claim of a deleted pod unmounted.
type work struct {
	claim, pod string
}

var passWork = work{}

// runController collects the backups and claims of one namespace until ctx
// ends. clk is what the collector takes for now, in its decisions, its
// annotations and its requeues (the real clock outside tests); onPass, if
// set, is called with the report of every pass.
func runController(ctx context.Context, cfg *rest.Config, o controllerOptions, clk clock.WithTicker, onPass func(report)) error {
	log := logr.FromContextOrDiscard(ctx).WithValues("namespace", o.namespace, "dryRun", o.dryRun)
	selector, err := labels.Parse(o.claimSelector)
	if err != nil {
		return fmt.Errorf("--claim-selector %q: %w", o.claimSelector, err)
	}
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
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "aerospike-gc"})

	core := informers.NewSharedInformerFactoryWithOptions(cs, 10*time.Minute, informers.WithNamespace(o.namespace))
	pods, claims := core.Core().V1().Pods(), core.Core().V1().PersistentVolumeClaims()
	dynFactory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 10*time.Minute, o.namespace, nil)
	backupInformer := dynFactory.ForResource(api.GroupVersionResource)

	manager, err := lifecycle.New(lifecycle.Config{
		Client:      lifecycle.ClientGo(cs.CoreV1()),
		Clock:       clk,
		Annotations: lifecycle.Annotations{Prefix: lifecycle.AerospikeAnnotationPrefix},
	})
	if err != nil {
		return err
	}
	c := &collector{
		namespace: o.namespace,
		backups:   dynamicBackups{dyn, backupInformer.Lister()},
		secrets:   cs.CoreV1(),
		claims:    cs.CoreV1(),
		open:      openBucket,
		lifecycle: manager,
		claimScope: lifecycle.Scope{Namespace: o.namespace, Selector: selector,
			Claims: lifecycle.InformerClaims(claims.Lister()), Pods: lifecycle.InformerPods(pods.Lister())},
		recorder:   recorder,
		clock:      clk,
		dryRun:     o.dryRun,
		retryAfter: o.retryAfter,
		notBefore:  map[types.UID]time.Time{},
	}

	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[work](),
		workqueue.TypedRateLimitingQueueConfig[work]{Name: "aerospike-gc", Clock: clk})
	// Any change to a backup, claim or pod may change what is expired, or
	// when: run a pass.
	onChange := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { queue.Add(passWork) },
		UpdateFunc: func(any, any) { queue.Add(passWork) },
		DeleteFunc: func(any) { queue.Add(passWork) },
	}
	for _, inf := range []cache.SharedIndexInformer{backupInformer.Informer(), claims.Informer()} {
		if _, err := inf.AddEventHandler(onChange); err != nil {
			return err
		}
	}
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { queue.Add(passWork) },
		UpdateFunc: func(any, any) {},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				for _, v := range pod.Spec.Volumes {
					if v.PersistentVolumeClaim != nil {
						queue.Add(work{claim: v.PersistentVolumeClaim.ClaimName, pod: pod.Name})
					}
				}
			}
			queue.Add(passWork)
		},
	}); err != nil {
		return err
	}
	core.Start(ctx.Done())
	dynFactory.Start(ctx.Done())
	defer core.Shutdown()
	defer dynFactory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), backupInformer.Informer().HasSynced, claims.Informer().HasSynced, pods.Informer().HasSynced) {
		return fmt.Errorf("waiting for the informers: %w", ctx.Err())
	}
	go func() {
		<-ctx.Done()
		queue.ShutDown()
	}()
	log.Info("controller started")
	queue.Add(passWork)
	for {
		w, quit := queue.Get()
		if quit {
			return nil
		}
		c.process(logr.NewContext(ctx, log), queue, w, onPass)
	}
}

func (c *collector) process(ctx context.Context, queue workqueue.TypedRateLimitingInterface[work], w work, onPass func(report)) {
	defer queue.Done(w)
	log := logr.FromContextOrDiscard(ctx)
	if w != passWork {
		marked, err := c.markUnmounted(ctx, w.claim, w.pod)
		if err != nil && ctx.Err() == nil {
			log.Error(err, "mark claim unmounted", "claim", w.claim, "pod", w.pod)
			queue.AddRateLimited(w)
			return
		}
		queue.Forget(w)
		if marked {
			log.Info("claim unmounted", "claim", w.claim, "pod", w.pod)
		}
		return
	}
	rep, err := c.pass(ctx)
	if err != nil && ctx.Err() == nil {
		log.Error(err, "collection pass failed")
		rep.RequeueAfter = c.retryAfter
	}
	for _, o := range rep.Backups {
		log.V(1).Info("backup", "name", o.Backup, "deleted", o.Deleted, "reason", o.Reason, "message", o.Message)
	}
	for _, d := range rep.Claims.Deleted {
		log.Info("claim collected", "claim", d.Claim, "reason", d.Reason)
	}
	for _, s := range rep.Claims.Skipped {
		log.Info("expired claim kept", "claim", s.Claim, "reason", s.Reason, "detail", s.Detail)
	}
	if rep.RequeueAfter > 0 {
		queue.AddAfter(passWork, rep.RequeueAfter)
	}
	if onPass != nil {
		onPass(rep)
	}
}

// dynamicBackups reads backups from the informer cache and the API server
// through the dynamic client.
type dynamicBackups struct {
	client dynamic.Interface
	lister cache.GenericLister
}

func (d dynamicBackups) List(_ context.Context, namespace string) ([]*api.AerospikeNamespaceBackup, error) {
	objs, err := d.lister.ByNamespace(namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	out := make([]*api.AerospikeNamespaceBackup, 0, len(objs))
	for _, o := range objs {
		b, err := fromUnstructured(o.(*unstructured.Unstructured))
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

func (d dynamicBackups) Get(ctx context.Context, namespace, name string) (*api.AerospikeNamespaceBackup, error) {
	u, err := d.client.Resource(api.GroupVersionResource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return fromUnstructured(u)
}

func (d dynamicBackups) UpdateStatus(ctx context.Context, b *api.AerospikeNamespaceBackup) error {
	u, err := toUnstructured(b)
	if err != nil {
		return err
	}
	_, err = d.client.Resource(api.GroupVersionResource).Namespace(b.Namespace).UpdateStatus(ctx, u, metav1.UpdateOptions{})
	return err
}

func (d dynamicBackups) Delete(ctx context.Context, namespace, name string, uid types.UID, resourceVersion string) error {
	return d.client.Resource(api.GroupVersionResource).Namespace(namespace).Delete(ctx, name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &resourceVersion}})
}

func fromUnstructured(u *unstructured.Unstructured) (*api.AerospikeNamespaceBackup, error) {
	var b api.AerospikeNamespaceBackup
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &b); err != nil {
		return nil, fmt.Errorf("decode %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return &b, nil
}

func toUnstructured(b *api.AerospikeNamespaceBackup) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
	if err != nil {
		return nil, fmt.Errorf("encode backup %s/%s: %w", b.Namespace, b.Name, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(api.Group + "/" + api.Version)
	u.SetKind(api.Kind)
	return u, nil
}
