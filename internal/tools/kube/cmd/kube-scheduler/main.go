// Command kube-scheduler is the upstream scheduler, built from pinned
// modules for testenv: it binds pods to the fake nodes that KWOK keeps
// alive, and so lets WaitForFirstConsumer claims bind.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand()))
}
