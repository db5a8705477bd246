// Command kube-controller-manager is the upstream controller manager of
// k8s.io/kubernetes (garbage collector included), wired exactly as
// cmd/kube-controller-manager/controller-manager.go wires it, plus a
// lifeline so that it never outlives the test that started it.
package main

import (
	"os"
	_ "time/tzdata"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"

	"github.com/cascade-k8s/cascade/hack/kube/internal/lifeline"
)

func main() {
	lifeline.Hold()
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
