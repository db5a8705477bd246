//go:build !linux

package check

// allocHuge allocates n zeroed elements (see the Linux version).
func allocHuge[T any](n int) []T { return make([]T, n) }

// freeHuge is a no-op: allocHuge's memory is the garbage collector's.
func freeHuge[T any](s []T) {}
