// Package rbactest checks an example operator's RBAC manifest against the
// API requests its controller really makes, both ways: everything the
// controller asks for is granted, and everything granted is asked for.
//
// A [Recorder] wraps the controller's *rest.Config, or serves a command
// that reads a kubeconfig through a proxy ([Recorder.Kubeconfig]), and
// records each request as RBAC authorizes it: verb, API group, resource
// (with "/subresource"), namespace and name. [Rules] reads the Roles and
// ClusterRoles of a manifest file, and [Check] fails the test for each
// request no rule allows and for each granted verb no request used, unless
// the test excuses it with a reason.
//
// Guarantees:
//   - Requests are mapped to verbs as the API server does (its
//     RequestInfoFactory): GET is get, list or watch (by a name in the path,
//     ?watch=true, or the legacy /watch/ prefix), POST create, PUT update,
//     PATCH patch, DELETE delete or, without a name, deletecollection. A
//     field selector on metadata.name gives a list or watch that name.
//   - A Role's rules allow requests in its namespace only (as mapped by the
//     test); a ClusterRole's allow them everywhere. resourceNames limit a
//     rule to those names, so a create, which has no name, is never allowed
//     by such a rule.
//   - A request outside the resource API (discovery, /version, /healthz) is
//     recorded with its path, and only a nonResourceURLs rule allows it.
//   - A watch that starts with the current objects (sendInitialEvents=true,
//     client-go's watch-list) is recorded as a list too: informers list
//     instead against API servers without it, so the manifest must grant
//     both.
//   - A grant is used if a request was allowed by that very rule: the same
//     verb granted by two Roles is reported for the Role that went unused.
//
// Not guaranteed:
//   - Requests made without the wrapped config or the recorder's kubeconfig
//     (another client built from the test's kubeconfig, for instance) are
//     not seen; whatever they need looks unused.
//   - Bindings are not read: a Role nobody is bound to still counts.
//   - Aggregated ClusterRoles and the cluster's default roles (such as
//     system:discovery) are not taken into account.
//   - A wildcard ("*") allows what RBAC allows, but is never used in full, so
//     each wildcard grant is reported unless excused.
package rbactest
