// Command opstask creates, lists, watches and approves the EtcdOpsTasks of the
// etcd-opstask example operator; see package opsctl.
//
//	go run ./examples/etcd-opstask/cmd/opstask create snapshot --type full --etcd main
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/groundskeeper-io/groundskeeper/examples/etcd-opstask/opsctl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := opsctl.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
