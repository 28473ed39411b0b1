package lifecycle

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// Client is every request this package sends to the API server: the few
// calls it makes on claims and pods, each with a context. ClientGo adapts a
// client-go clientset; package crt adapts a controller-runtime client. The
// pod writes and CreateClaim serve Manager.SyncSet only: a Client that
// serves no claim set may answer them with an error.
//
// Implementations must return the API server's errors with their type
// (apierrors.IsNotFound, IsConflict, IsForbidden work on them), and must
// read the API server itself in GetClaim and ListPods, never a cache: a
// read-modify-write of a claim and the mount check before a deletion rest
// on them. ListClaims may read a cache: every write that follows it carries
// the resourceVersion it was decided on.
type Client interface {
	GetClaim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error)
	// ListClaims lists one page: opts carries the label selector, Limit and
	// Continue.
	ListClaims(ctx context.Context, namespace string, opts metav1.ListOptions) (*corev1.PersistentVolumeClaimList, error)
	// PatchClaim applies a JSON merge patch (RFC 7386) to the claim.
	PatchClaim(ctx context.Context, namespace, name string, mergePatch []byte) (*corev1.PersistentVolumeClaim, error)
	// DeleteClaim deletes the claim if it matches the preconditions.
	DeleteClaim(ctx context.Context, namespace, name string, preconditions metav1.Preconditions) error
	// ListPods lists one page of pods from the API server.
	ListPods(ctx context.Context, namespace string, opts metav1.ListOptions) (*corev1.PodList, error)
	// CreateClaim creates the claim in its namespace and returns it as
	// created (with its UID).
	CreateClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error)
	// CreatePod creates the pod in its namespace and returns it as created.
	CreatePod(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error)
	// PatchPod applies a JSON merge patch (RFC 7386) to the pod.
	PatchPod(ctx context.Context, namespace, name string, mergePatch []byte) error
	// DeletePod deletes the pod if it matches the preconditions.
	DeletePod(ctx context.Context, namespace, name string, preconditions metav1.Preconditions) error
}

// CoreV1 is the part of a client-go clientset that ClientGo needs:
// kubernetes.Interface.CoreV1() satisfies it.
type CoreV1 interface {
	corev1client.PersistentVolumeClaimsGetter
	corev1client.PodsGetter
}

// ClientGo returns the Client that sends every request through a client-go
// clientset: lifecycle.ClientGo(clientset.CoreV1()).
func ClientGo(c CoreV1) Client { return clientGo{c} }

type clientGo struct{ c CoreV1 }

func (g clientGo) GetClaim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	return g.c.PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (g clientGo) ListClaims(ctx context.Context, namespace string, opts metav1.ListOptions) (*corev1.PersistentVolumeClaimList, error) {
	return g.c.PersistentVolumeClaims(namespace).List(ctx, opts)
}

func (g clientGo) PatchClaim(ctx context.Context, namespace, name string, mergePatch []byte) (*corev1.PersistentVolumeClaim, error) {
	return g.c.PersistentVolumeClaims(namespace).Patch(ctx, name, types.MergePatchType, mergePatch, metav1.PatchOptions{})
}

func (g clientGo) DeleteClaim(ctx context.Context, namespace, name string, preconditions metav1.Preconditions) error {
	return g.c.PersistentVolumeClaims(namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &preconditions})
}

func (g clientGo) ListPods(ctx context.Context, namespace string, opts metav1.ListOptions) (*corev1.PodList, error) {
	return g.c.Pods(namespace).List(ctx, opts)
}

func (g clientGo) CreateClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error) {
	return g.c.PersistentVolumeClaims(claim.Namespace).Create(ctx, claim, metav1.CreateOptions{})
}

func (g clientGo) CreatePod(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	return g.c.Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
}

func (g clientGo) PatchPod(ctx context.Context, namespace, name string, mergePatch []byte) error {
	_, err := g.c.Pods(namespace).Patch(ctx, name, types.MergePatchType, mergePatch, metav1.PatchOptions{})
	return err
}

func (g clientGo) DeletePod(ctx context.Context, namespace, name string, preconditions metav1.Preconditions) error {
	return g.c.Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &preconditions})
}

// ClaimLister lists the claims of a namespace from a cache. A cache may lag
// behind the API server: the package decides nothing destructive on it
// alone (see Collect).
type ClaimLister interface {
	ListClaims(ctx context.Context, namespace string, selector labels.Selector) ([]*corev1.PersistentVolumeClaim, error)
}

// PodLister lists the pods of a namespace from a cache.
type PodLister interface {
	ListPods(ctx context.Context, namespace string, selector labels.Selector) ([]*corev1.Pod, error)
}

// InformerClaims returns the ClaimLister of a client-go informer's lister:
// lifecycle.InformerClaims(factory.Core().V1().PersistentVolumeClaims().Lister()).
func InformerClaims(l corelisters.PersistentVolumeClaimLister) ClaimLister { return informerClaims{l} }

// InformerPods returns the PodLister of a client-go informer's lister.
func InformerPods(l corelisters.PodLister) PodLister { return informerPods{l} }

type informerClaims struct {
	l corelisters.PersistentVolumeClaimLister
}

func (i informerClaims) ListClaims(_ context.Context, namespace string, sel labels.Selector) ([]*corev1.PersistentVolumeClaim, error) {
	return i.l.PersistentVolumeClaims(namespace).List(sel)
}

type informerPods struct{ l corelisters.PodLister }

func (i informerPods) ListPods(_ context.Context, namespace string, sel labels.Selector) ([]*corev1.Pod, error) {
	return i.l.Pods(namespace).List(sel)
}
