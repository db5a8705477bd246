package check

// prefetch asks the CPU to bring the cache line of *p in, without waiting
// for it (PREFETCHT0): a plain load would stall the worker until the line
// arrives. It reads nothing the Go memory model can see.
//
//go:noescape
func prefetch(p *slot)
