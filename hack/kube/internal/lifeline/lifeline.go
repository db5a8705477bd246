// Package lifeline ties a control-plane process to the process that started
// it. cascade starts etcd, kube-apiserver and kube-controller-manager from
// tests; when a test binary panics or is killed by `go test -timeout`, its
// deferred Stop never runs, and without this the servers would outlive it.
//
// Two mechanisms, because either alone has a gap: PR_SET_PDEATHSIG fires
// when the forking *thread* exits (which the Go runtime may do), and a
// getppid poll catches reparenting to init or a subreaper within half a
// second.
package lifeline

import (
	"os"
	"syscall"
	"time"
)

// Hold arranges for this process to exit when its parent does. Set
// CASCADE_NO_LIFELINE=1 to run a binary detached (for example by hand).
func Hold() {
	if os.Getenv("CASCADE_NO_LIFELINE") == "1" {
		return
	}
	parent := os.Getppid()
	if parent <= 1 {
		return // already detached at start: nothing to follow
	}
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0)
	go func() {
		for range time.Tick(500 * time.Millisecond) {
			if os.Getppid() != parent {
				os.Exit(3)
			}
		}
	}()
}
