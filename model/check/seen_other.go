//go:build !linux

package check

// allocHuge allocates n zeroed elements (see the Linux version).
func allocHuge[T any](n int) []T { return make([]T, n) }
