package memstore_test

import (
	"context"

	"testing"

	"github.com/groundskeeper-io/groundskeeper/opstask/memstore"
	"github.com/groundskeeper-io/groundskeeper/opstask/opstasktest"
)

func TestConformance(t *testing.T) {
	opstasktest.Run(t, func(t *testing.T) opstasktest.Harness {
		s := memstore.New(nil)
		return opstasktest.Harness{Store: s, Create: s.Create, Approve: func(ctx context.Context, name, token string) error {
			return s.Approve(ctx, "", name, token)
		}}
	})
}
