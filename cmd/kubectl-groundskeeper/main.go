// Command kubectl-groundskeeper is a kubectl plugin that explains the
// decisions of operators built on groundskeeper: why a backup or a claim is
// kept, who holds the operator lock, what is queued.
//
//	cd cmd/kubectl-groundskeeper && go install .
//	kubectl groundskeeper --help
package main

import (
	"os"

	"github.com/groundskeeper-io/groundskeeper/cmd/kubectl-groundskeeper/plugin"
)

func main() {
	os.Exit(plugin.Main(plugin.Options{}, os.Args[1:]))
}
