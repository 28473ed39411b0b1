// Package pager reads every page of a paginated Kubernetes list request, the
// loop each package that lists from the API server otherwise writes again.
package pager

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// List is a page of a list response: typed lists (*corev1.PodList) and
// *unstructured.UnstructuredList have this method.
type List interface {
	GetContinue() string
}

// Each sends list with opts, then again with each continue token the server
// returns, and hands every page to page in order, until the last page. The
// first error of list or page ends the loop and is returned as it is: the
// caller wraps it with what it was listing. opts.Limit is the page size.
func Each[L List](ctx context.Context, opts metav1.ListOptions,
	list func(context.Context, metav1.ListOptions) (L, error), page func(L) error) error {
	for {
		l, err := list(ctx, opts)
		if err != nil {
			return err
		}
		if err := page(l); err != nil {
			return err
		}
		next := l.GetContinue()
		if next == "" {
			return nil
		}
		opts.Continue = next
	}
}
