package opstask_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundskeeper-io/groundskeeper/opstask"
)

func metaTime(t time.Time) *metav1.Time { m := metav1.NewTime(t); return &m }

// runUntilEnd runs c under ctx until the test ends, then stops it and
// waits for Run to return.
func runUntilEnd(t *testing.T, ctx context.Context, c *opstask.Controller) {
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
}
