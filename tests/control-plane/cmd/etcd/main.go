// Command etcd is the etcd server of the pinned version (go.mod), built from
// its module so the control plane needs no etcd package from the machine.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
