// Command etcd is etcd's own server (go.etcd.io/etcd/server/v3, pinned in
// this module), the membership store of the cluster tests: Debian's etcd
// is 3.4, too old for the cluster's client. It adds nothing to etcdmain.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
