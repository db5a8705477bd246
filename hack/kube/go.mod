// Module kubebuild builds the control-plane binaries cascade runs against
// (etcd, kube-apiserver, kube-controller-manager) from the Go module proxy.
// It is a separate module so the main module never depends on k8s.io/kubernetes.
//
// This file only marks the module root. Each Kubernetes minor has its own
// module file, v1.MINOR/go.mod with its go.sum, and build.sh passes it with
// -modfile (see README.md here). To work on cmd/ with an editor, set
// GOFLAGS=-modfile=v1.36/go.mod (or another minor).
module github.com/cascade-k8s/cascade/hack/kube

go 1.26.0
