package plugin_test

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/groundskeeper-io/groundskeeper/cmd/kubectl-groundskeeper/plugin"
)

// An operator's own kubectl plugin, kubectl-myoperator, with groundskeeper's
// commands set to its task resource and lock. Its main would end with
// os.Exit(plugin.Run(root, os.Args[1:])).
func ExampleAddTo() {
	root := &cobra.Command{Use: "kubectl-myoperator", Short: "Operate my databases"}
	plugin.AddTo(root, plugin.Options{
		Name:            "kubectl myoperator",
		Tasks:           "etcdopstasks.ops.example.com",
		TaskTargetField: "etcdName",
		LockName:        "myoperator-lock",
	})
	for _, c := range root.Commands() {
		fmt.Printf("%-8s %s\n", c.Name(), c.Short)
	}
	tasks, _, _ := root.Find([]string{"tasks"})
	fmt.Println("tasks --resource defaults to", tasks.Flag("resource").DefValue)
	// Output:
	// backups  Preview a retention policy over a group of backups: what it keeps and why, what is deletable and when
	// claims   Show tracked claims: mounted or not, the pod that last mounted them, their TTL countdown, what the collector would delete now
	// explain  Explain why an object is kept, or when it becomes deletable
	// lock     Show the operator lock: holder, start, end, time left, deny list, pending upgrades
	// prefix   Show what an object-store prefix holds: objects, bytes, versions, Object Lock, lifecycle rules
	// tasks    Show the task queues: per target, state, age, position, steps and the step awaiting approval
	// tasks --resource defaults to etcdopstasks.ops.example.com
}
