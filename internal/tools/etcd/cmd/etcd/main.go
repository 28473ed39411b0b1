// Command etcd is the upstream etcd server, built from pinned modules for
// testenv.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
