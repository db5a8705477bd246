// Command kine is k3s's etcd shim (github.com/k3s-io/kine) with its SQLite
// driver, upstream's main plus a lifeline: it exits when the process that
// started it exits, as the binaries of hack/kube do, so a test binary killed
// by `go test -timeout` leaves no kine behind.
package main

import (
	"context"
	"errors"
	"os"
	"syscall"
	"time"

	"github.com/k3s-io/kine/pkg/app"
	"github.com/sirupsen/logrus"
)

func main() {
	followParent()
	if err := app.New().Run(os.Args); err != nil && !errors.Is(err, context.Canceled) {
		logrus.Fatal(err)
	}
}

// followParent makes kine exit when its parent does, like hack/kube's
// internal/lifeline (which another module cannot import): PR_SET_PDEATHSIG
// for the common case, a getppid poll for the forking thread exiting first.
// CASCADE_NO_LIFELINE=1 runs kine detached.
func followParent() {
	parent := os.Getppid()
	if os.Getenv("CASCADE_NO_LIFELINE") == "1" || parent <= 1 {
		return
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
