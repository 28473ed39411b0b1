package backups

import (
	"context"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/groundskeeper-io/groundskeeper/retention"
)

// PolicyOf is a collect.GroupPolicy's Policy for backups whose retention
// policy is a field of another object, the database they back up: the
// GroupPolicy's Group returns that object's "namespace/name" (b.Namespace +
// "/" + b.Spec.Database), and PolicyOf reads it through r (the manager's
// client, a cache) and parses the policy it returns with
// retention.ParsePolicy:
//
//	Policy: backups.PolicyOf[*api.DB](mgr.GetClient(), "spec.retention", func(db *api.DB) string { return db.Spec.Retention }),
//
// A group that is not "namespace/name", an object that cannot be read (it
// is gone) and a policy ParsePolicy refuses are errors that name the object
// and field: collect keeps the group's backups (ReasonInvalidPolicy).
func PolicyOf[P Object[B], B any](r client.Reader, field string, policy func(P) string) func(context.Context, string) (retention.Policy, error) {
	return func(ctx context.Context, group string) (retention.Policy, error) {
		ns, name, ok := strings.Cut(group, "/")
		if !ok || name == "" {
			return nil, fmt.Errorf("backups: PolicyOf: group %q is not namespace/name", group)
		}
		o := P(new(B))
		if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, o); err != nil {
			return nil, fmt.Errorf("the policy's object %s: %w", group, err)
		}
		p, err := retention.ParsePolicy(policy(o))
		if err != nil {
			return nil, fmt.Errorf("%s of %s: %w", field, group, err)
		}
		return p, nil
	}
}
