package check

import "unsafe"

// prefetch asks the CPU to bring the cache line at p in, without waiting
// for it (PREFETCHT0): a plain load would stall the worker until the line
// arrives. It reads nothing the Go memory model can see.
//
//go:noescape
func prefetch(p unsafe.Pointer)
