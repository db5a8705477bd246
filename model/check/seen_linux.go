package check

import (
	"syscall"
	"unsafe"
)

// allocHuge allocates n zeroed elements and asks Linux to back them with
// transparent huge pages (madvise MADV_HUGEPAGE; best effort, effective
// where THP is "always" or "madvise"). The visited table is probed at
// random, so with 4 KiB pages almost every claim also misses the TLB;
// with 2 MiB pages a fanout-8 search spends about a tenth less time. The
// frontier's encoding chunks are written and read once per level, and
// fault in 512 times faster. The memory is fresh from make, so its pages
// are not faulted in yet and the kernel can give it huge pages as it is
// first touched.
func allocHuge[T any](n int) []T {
	s := make([]T, n)
	const minHuge = 4 << 20
	var zero T
	if size := n * int(unsafe.Sizeof(zero)); size >= minHuge {
		b := unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), size)
		_ = syscall.Madvise(b, madvHugepage)
	}
	return s
}

// madvHugepage is MADV_HUGEPAGE, which package syscall does not name.
const madvHugepage = 14
