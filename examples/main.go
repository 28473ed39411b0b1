// Command examples lists the example operators of groundskeeper, one per
// design document the SDK comes from, and how to run each.
//
//	go run ./examples
package main

import (
	"fmt"
	"os"
	"text/tabwriter"
)

type example struct {
	dir, seed, shows string
	ready            bool
}

var examples = []example{
	{"aerospike-gc", "aerospike-operator garbage collection", "backups and claims deleted after their TTL, data before the resource", true},
	{"backup-entry", "Gardener backup buckets and entries", "per-cluster prefixes in a shared bucket, deleted after a grace period", true},
	{"etcd-opstask", "etcd-druid DEP-05 out-of-band tasks", "on-demand snapshots, compaction and copies as a FIFO task queue", true},
	{"statefulset-pvc", "Kubernetes KEP-1847", "the four claim delete policies for a custom workload", true},
	{"fdb-lock", "FoundationDB operator technical design", "a subreconciler chain whose global steps take the operator lock", true},
	{"minidb", "all of them, in one operator to copy", "backups by retention, claims by KEP-1847, config under the lock, a task queue", true},
}

func main() {
	fmt.Println("groundskeeper example operators (run one with: go run ./examples/<name>)")
	fmt.Println()
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tDESIGN\tSHOWS\tSTATUS")
	for _, e := range examples {
		status := "not written yet"
		if e.ready {
			status = "runnable"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", e.dir, e.seed, e.shows, status)
	}
	w.Flush()
}
