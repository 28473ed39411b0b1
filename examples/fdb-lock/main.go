// Command fdb-lock is the FoundationDB operator's locking pattern as a thin
// operator: a subreconciler chain (package subreconcile) whose global steps
// take the global operator lock (package locking), with the deny list and
// the disable switch driven from the resource's spec.
//
//	go run ./examples/fdb-lock                  # a simulated timeline, no cluster
//	go run ./examples/fdb-lock --kubeconfig=... --lock-id=dc1 --lock-backend=kubernetes
//
// Without a kubeconfig (and outside a cluster) it plays a scenario on an
// in-memory lock with a simulated clock and prints what each instance saw
// and decided. With one, it is a controller of Database resources
// (examples.groundskeeper.io/v1alpha1, deploy/crd.yaml).
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "fdb-lock:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	return runScenario(os.Stdout)
}
