//go:build !linux

package check

// allocSlots allocates a visited table's slots (see the Linux version).
func allocSlots(n int) []slot { return make([]slot, n) }
