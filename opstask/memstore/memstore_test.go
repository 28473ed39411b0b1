package memstore_test

import (
	"testing"

	"github.com/groundskeeper-io/groundskeeper/opstask/memstore"
	"github.com/groundskeeper-io/groundskeeper/opstask/opstasktest"
)

func TestConformance(t *testing.T) {
	opstasktest.Run(t, func(t *testing.T) opstasktest.Harness {
		s := memstore.New(nil)
		return opstasktest.Harness{Store: s, Create: s.Create}
	})
}
