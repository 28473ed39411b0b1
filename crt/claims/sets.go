package claims

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/groundskeeper-io/groundskeeper/lifecycle"
)

// Sets builds, for an owner of type T read by a controller-runtime
// reconciler, the parts of a lifecycle.ClaimSet that come from the manager:
// the owner's state, its fresh read from the API server, and the caches of
// pods and claims. The reconciler adds the label and how to build pods and
// claims, and calls lifecycle.Manager.SyncSet:
//
//	sets := claims.Sets[*api.DB]{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), GVK: api.GVK, Spec: spec, Label: api.DBLabel}
//	sets.Watch(ctrl.NewControllerManagedBy(mgr).For(&api.DB{})).Complete(r)
//	...
//	set, err := sets.For(db)
//	set.Pod, set.Claims = podOf(db), claimsOf(db)
//	res, err := m.SyncSet(ctx, set, nil)
//
// The manager's cache must hold the owner's pods (by the label) and the
// claims of the namespace (the policy applies to every claim named as the
// set names them, pre-provisioned ones included).
type Sets[T client.Object] struct {
	// Client is the manager's client (mgr.GetClient()): pods and claims
	// are listed from its cache.
	Client client.Client
	// APIReader is the manager's API reader (mgr.GetAPIReader()): the
	// owner is read again from the API server before a scale-down.
	APIReader client.Reader
	// GVK is the owner's kind, for the owner references.
	GVK schema.GroupVersionKind
	// Spec returns the owner's desired replicas and its claim retention
	// policy; an error (an invalid policy) stops the call.
	Spec func(owner T) (replicas int, policy lifecycle.Policy, err error)
	// Label is lifecycle.ClaimSet.Label: the key of the label whose value
	// is the owner's name, on its pods and claims.
	Label string
}

// Watch adds to b the watches a controller of the owners needs: their pods
// (Owns: a pod is the owner's) and every claim (Requests: a claim the
// policy keeps has no owner reference to follow), so that a claim
// created, bound or deleted, or a pod gone, reconciles its owner.
func (s Sets[T]) Watch(b *builder.Builder) *builder.Builder {
	return b.Owns(&corev1.Pod{}).Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(s.Requests))
}

// Requests maps a claim to the owner it belongs to, for a watch on claims
// (handler.EnqueueRequestsFromMapFunc(sets.Requests)): the owner named by
// its controller reference when that is of the owner's group and kind, else
// the one its Label names. Under whenScaled: Delete a condemned pod controls
// its claims; the label still leads back to the owner.
func (s Sets[T]) Requests(_ context.Context, claim client.Object) []reconcile.Request {
	name := ""
	if s.Label != "" {
		name = claim.GetLabels()[s.Label]
	}
	if ref := metav1.GetControllerOf(claim); ref != nil && ref.Kind == s.GVK.Kind {
		if gv, err := schema.ParseGroupVersion(ref.APIVersion); err == nil && gv.Group == s.GVK.Group {
			name = ref.Name
		}
	}
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: claim.GetNamespace(), Name: name}}}
}

// For returns the ClaimSet of owner with Namespace, Owner, Label, Reread,
// PodCache and ClaimCache filled in.
func (s Sets[T]) For(owner T) (lifecycle.ClaimSet, error) {
	if s.Client == nil || s.APIReader == nil || s.Spec == nil || s.GVK.Kind == "" || s.Label == "" {
		return lifecycle.ClaimSet{}, fmt.Errorf("crt: claims.Sets: Client, APIReader, GVK, Spec and Label are required (GVK = %q, Label = %q)", s.GVK.String(), s.Label)
	}
	o, err := s.owner(owner)
	if err != nil {
		return lifecycle.ClaimSet{}, err
	}
	key := client.ObjectKeyFromObject(owner)
	return lifecycle.ClaimSet{
		Namespace: owner.GetNamespace(),
		Owner:     o,
		Label:     s.Label,
		Reread: func(ctx context.Context) (*lifecycle.Owner, error) {
			fresh := owner.DeepCopyObject().(T)
			err := s.APIReader.Get(ctx, key, fresh)
			switch {
			case apierrors.IsNotFound(err):
				return nil, nil
			case err != nil:
				return nil, err
			}
			o, err := s.owner(fresh)
			if err != nil {
				return nil, err
			}
			return &o, nil
		},
		PodCache:   PodCache(s.Client),
		ClaimCache: Cache(s.Client),
	}, nil
}

func (s Sets[T]) owner(obj T) (lifecycle.Owner, error) {
	replicas, policy, err := s.Spec(obj)
	if err != nil {
		return lifecycle.Owner{}, err
	}
	return lifecycle.Owner{
		Ref:      lifecycle.RefTo(obj, s.GVK),
		Replicas: replicas,
		Policy:   policy,
		Version:  obj.GetResourceVersion(),
		Deleting: obj.GetDeletionTimestamp() != nil,
	}, nil
}

// The pod and claim writes of lifecycle.Client, for SyncSet.

func (l lifecycleClient) CreateClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error) {
	c := claim.DeepCopy()
	if err := l.c.Create(ctx, c); err != nil {
		return nil, err
	}
	return c, nil
}

func (l lifecycleClient) CreatePod(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	p := pod.DeepCopy()
	if err := l.c.Create(ctx, p); err != nil {
		return nil, err
	}
	return p, nil
}

func (l lifecycleClient) PatchPod(ctx context.Context, namespace, name string, mergePatch []byte) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	return l.c.Patch(ctx, pod, client.RawPatch(types.MergePatchType, mergePatch))
}

func (l lifecycleClient) DeletePod(ctx context.Context, namespace, name string, pre metav1.Preconditions) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	return l.c.Delete(ctx, pod, client.Preconditions(pre))
}
