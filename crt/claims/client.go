package claims

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/groundskeeper-io/groundskeeper/lifecycle"
)

// Client returns the lifecycle.Client of a controller-runtime manager: writes and claim lists through c (mgr.GetClient(), whose reads
// come from the manager's cache), and the reads lifecycle needs fresh (a
// claim before a read-modify-write, pods before a deletion or an unmount
// mark) through apiReader (mgr.GetAPIReader()).
//
// lifecycle lists claims in pages (Limit and Continue). The manager's cache
// cannot continue a list: it stops at Limit and answers every list with a
// continue token it refuses. A claim list that c answers from the cache is
// therefore read whole, as one page without a continue token; a list that c
// sends to the API server (claims not cached) is paged as asked. A pod list
// from apiReader that comes from a cache is refused: the mount check before
// a deletion must read the API server.
func Client(c client.Client, apiReader client.Reader) lifecycle.Client {
	return lifecycleClient{c: c, live: apiReader}
}

// cacheContinue is the continue token controller-runtime's caches (the
// informer cache and the multi-namespace cache) put on every list they
// answer; they refuse a list that carries it.
const cacheContinue = "continue-not-supported"

type lifecycleClient struct {
	c    client.Client
	live client.Reader
}

var _ lifecycle.Client = lifecycleClient{}

func (l lifecycleClient) GetClaim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	var claim corev1.PersistentVolumeClaim
	if err := l.live.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &claim); err != nil {
		return nil, err
	}
	return &claim, nil
}

func (l lifecycleClient) ListClaims(ctx context.Context, namespace string, opts metav1.ListOptions) (*corev1.PersistentVolumeClaimList, error) {
	lo, err := listOptions(namespace, opts)
	if err != nil {
		return nil, err
	}
	var list corev1.PersistentVolumeClaimList
	if err := l.c.List(ctx, &list, lo); err != nil {
		return nil, err
	}
	if list.Continue != cacheContinue {
		return &list, nil // the API server's page
	}
	// The cache, which stops at Limit and cannot continue: when it may have
	// stopped, read everything at once (from memory), the only page.
	if lo.Limit > 0 && int64(len(list.Items)) >= lo.Limit {
		lo.Limit = 0
		list = corev1.PersistentVolumeClaimList{}
		if err := l.c.List(ctx, &list, lo); err != nil {
			return nil, err
		}
	}
	list.Continue = ""
	return &list, nil
}

func (l lifecycleClient) PatchClaim(ctx context.Context, namespace, name string, mergePatch []byte) (*corev1.PersistentVolumeClaim, error) {
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := l.c.Patch(ctx, claim, client.RawPatch(types.MergePatchType, mergePatch)); err != nil {
		return nil, err
	}
	return claim, nil
}

func (l lifecycleClient) DeleteClaim(ctx context.Context, namespace, name string, pre metav1.Preconditions) error {
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	return l.c.Delete(ctx, claim, client.Preconditions(pre))
}

func (l lifecycleClient) ListPods(ctx context.Context, namespace string, opts metav1.ListOptions) (*corev1.PodList, error) {
	lo, err := listOptions(namespace, opts)
	if err != nil {
		return nil, err
	}
	var list corev1.PodList
	if err := l.live.List(ctx, &list, lo); err != nil {
		return nil, err
	}
	if list.Continue == cacheContinue {
		return nil, errors.New("crt: claims.Client: the pods were listed from a cache, which lifecycle must not trust before a deletion: pass the manager's API reader (mgr.GetAPIReader()) as apiReader")
	}
	return &list, nil
}

// listOptions turns a page request of client-go's form into
// controller-runtime's.
func listOptions(namespace string, opts metav1.ListOptions) (*client.ListOptions, error) {
	sel, err := labels.Parse(opts.LabelSelector)
	if err != nil {
		return nil, fmt.Errorf("crt: label selector %q: %w", opts.LabelSelector, err)
	}
	return &client.ListOptions{Namespace: namespace, LabelSelector: sel, Limit: opts.Limit, Continue: opts.Continue}, nil
}

// Cache returns a lifecycle.ClaimLister over a controller-runtime
// reader, normally the manager's cache-backed client: lifecycle.Scope's
// Claims.
func Cache(r client.Reader) lifecycle.ClaimLister { return claimCache{r} }

// PodCache returns a lifecycle.PodLister over a controller-runtime reader,
// normally the manager's cache-backed client: lifecycle.Scope's Pods.
func PodCache(r client.Reader) lifecycle.PodLister { return podCache{r} }

type claimCache struct{ r client.Reader }

func (c claimCache) ListClaims(ctx context.Context, namespace string, sel labels.Selector) ([]*corev1.PersistentVolumeClaim, error) {
	var list corev1.PersistentVolumeClaimList
	if err := c.r.List(ctx, &list, &client.ListOptions{Namespace: namespace, LabelSelector: sel}); err != nil {
		return nil, err
	}
	out := make([]*corev1.PersistentVolumeClaim, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

type podCache struct{ r client.Reader }

func (c podCache) ListPods(ctx context.Context, namespace string, sel labels.Selector) ([]*corev1.Pod, error) {
	var list corev1.PodList
	if err := c.r.List(ctx, &list, &client.ListOptions{Namespace: namespace, LabelSelector: sel}); err != nil {
		return nil, err
	}
	out := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}
