package claims_test

import (
	"strings"
	"testing"

	"github.com/groundskeeper-io/groundskeeper/crt/claims"
)

// A tracker or collector without its Lifecycle or Claims is refused with an
// error that names the field, before anything is added to the manager (a
// nil one here: it is never touched), instead of a panic at set-up or at
// the first reconcile.
func TestSetupRefusesAMissingField(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func() error
		want  string
	}{
		{"tracker without Lifecycle", func() error { return claims.UnmountTracker{Name: "u"}.SetupWithManager(nil) }, `claims.UnmountTracker "u": Lifecycle is nil`},
		{"collector without Lifecycle", func() error { return claims.Collector{Name: "c"}.SetupWithManager(nil) }, `claims.UnmountTracker "c-unmount": Lifecycle is nil`},
	} {
		err := c.setup()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: SetupWithManager = %v; want an error containing %q", c.name, err, c.want)
		}
	}
}
