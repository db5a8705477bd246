// Command kube-apiserver is the upstream API server of k8s.io/kubernetes,
// wired exactly as cmd/kube-apiserver/apiserver.go wires it, plus a lifeline
// so that it never outlives the test that started it.
package main

import (
	"os"
	_ "time/tzdata"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"

	"github.com/cascade-k8s/cascade/hack/kube/internal/lifeline"
)

func main() {
	lifeline.Hold()
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
