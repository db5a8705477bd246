// Command etcd is the etcd server, built from go.etcd.io/etcd/server/v3 so
// that envtest can run without downloading release binaries. It exits when
// the process that started it exits (see internal/lifeline).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"

	"github.com/cascade-k8s/cascade/hack/kube/internal/lifeline"
)

func main() {
	lifeline.Hold()
	etcdmain.Main(os.Args)
}
