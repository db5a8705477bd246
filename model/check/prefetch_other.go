//go:build !amd64

package check

// prefetch is a no-op where cascade has no prefetch instruction for it.
func prefetch(p *slot) {}
