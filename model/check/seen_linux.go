package check

import (
	"sync"
	"syscall"
	"unsafe"
)

// allocHuge allocates n zeroed elements. From 4 MiB up it maps them
// itself, aligned to 2 MiB, and asks Linux to back them with transparent
// huge pages (madvise MADV_HUGEPAGE; best effort, effective where THP is
// "always" or "madvise"). The visited table is probed at random, so with
// 4 KiB pages almost every claim also misses the TLB; the frontier's
// encoding chunks are written once per level, and a 2 MiB page is one
// fault where 4 KiB pages are 512. The alignment matters: memory from the
// Go heap starts anywhere, and only the 2 MiB-aligned stretches of a
// range can be huge pages, so a 4 MiB chunk from make faulted in about
// half of its pages one by one. Such memory is not the garbage
// collector's: freeHuge returns it.
func allocHuge[T any](n int) []T {
	var zero T
	size := n * int(unsafe.Sizeof(zero))
	const minHuge, huge = 4 << 20, 2 << 20
	if size < minHuge || unsafe.Alignof(zero) > huge {
		return make([]T, n)
	}
	length := (size + huge - 1) &^ (huge - 1)
	m, err := syscall.Mmap(-1, 0, length+huge, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return make([]T, n)
	}
	// The stretch before the first 2 MiB boundary and after the aligned
	// range is mapped but never touched, so it costs no memory.
	off := int(-uintptr(unsafe.Pointer(&m[0])) & (huge - 1))
	b := m[off : off+length : off+length]
	_ = syscall.Madvise(b, madvHugepage)
	hugeMaps.Lock()
	hugeMaps.m[&b[0]] = m
	hugeMaps.Unlock()
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
}

// freeHuge unmaps memory allocHuge mapped; it leaves memory from make
// to the garbage collector. Nothing may use s afterwards.
func freeHuge[T any](s []T) {
	if cap(s) == 0 {
		return
	}
	p := (*byte)(unsafe.Pointer(&s[:1][0]))
	hugeMaps.Lock()
	m, ok := hugeMaps.m[p]
	delete(hugeMaps.m, p)
	hugeMaps.Unlock()
	if ok {
		_ = syscall.Munmap(m)
	}
}

// hugeMaps holds each mapping allocHuge made, by the start of the slice
// it returned.
var hugeMaps = struct {
	sync.Mutex
	m map[*byte][]byte
}{m: map[*byte][]byte{}}

// madvHugepage is MADV_HUGEPAGE, which package syscall does not name.
const madvHugepage = 14
