module github.com/cascade-k8s/cascade

go 1.26.0
