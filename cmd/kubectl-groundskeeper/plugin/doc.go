// Package plugin is the commands of kubectl-groundskeeper, for the person on
// call: why a backup or a claim is kept and when it becomes deletable
// (explain), what a retention policy keeps of a group of backups and why
// (backups), which claims are unmounted, their TTL countdown and what the
// claim collector would delete now, and which claims of a StatefulSet, or
// of another owner's claim set (lifecycle.ClaimSet), a scale to N or its
// deletion takes by its KEP-1847 policy (claims, claims fate), who holds the operator lock and who is denied it, in a ConfigMap or
// in etcd, once or after each change (lock, lock --watch), what is
// queued for each target and which step awaits approval, once or after
// each change (tasks, tasks --watch), and what
// an object-store prefix holds and its deletion (prefix, prefix rm). An
// operator author mounts them in their own kubectl plugin with AddTo, with
// their resource types, names and defaults in Options.
//
// Guarantees:
//
//   - kubectl's conventions, from what kubectl is built on (cobra,
//     k8s.io/cli-runtime): --kubeconfig, --context, -n and the other
//     kubeconfig flags; -o table|wide|json|yaml|name; --help with examples;
//     shell completion (the completion command).
//   - -A/--all-namespaces on the listings (claims, tasks, backups), as
//     kubectl's: a NAMESPACE column first, a List with -o json|yaml; each
//     namespace is planned alone, since names are unique only within one.
//   - Exit code 0 on success, 1 with one line on stderr naming what failed
//     (never a stack trace), 2 for bad usage (Run, Main).
//   - A command that writes (lock deny and allow, tasks approve, prefix rm) prints
//     exactly what it will do and is a dry run unless --yes is given or a
//     person answers yes on a terminal; it writes through the library's own
//     calls and their preconditions (locking.Lock.UpdateDenyList,
//     taskctl.Tasks.Approve with the resourceVersion read).
//   - Reading never writes: claims is a dry run of lifecycle's collector
//     (Annotations.PlanCollect); lock reads the record, the deny list and the
//     pending upgrades without creating the lock's ConfigMap; lock --watch
//     reads it again only when a watch (of the ConfigMap, or of the lock's
//     etcd keys) reports a change made after the watch began, never on a
//     timer, and prints only what changed; so does tasks --watch, on a watch
//     of the task resource.
//   - explain knows every reason that backupstore/collect, backupstore/share,
//     backupstore/share/pool, backupstore/share/migrate and lifecycle write
//     (a test reads their constants from the source).
//   - prefix rm deletes only through backupstore.DeletePrefix, with its
//     prefix checks at their strictest (a prefix ending in "/", never the
//     empty one) and Object Lock never bypassed; after a person's yes it
//     lists the prefix again and deletes nothing if it changed.
//
// Not provided: lifecycle rules on Azure in prefix (a storage account's
// lifecycle management policy is read through Azure Resource Manager, not
// the blob service). lock takes no -A: a lock is one named record, not a
// listing.
package plugin
