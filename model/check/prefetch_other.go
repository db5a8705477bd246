//go:build !amd64

package check

import "unsafe"

// prefetch is a no-op where cascade has no prefetch instruction for it.
func prefetch(p unsafe.Pointer) {}
