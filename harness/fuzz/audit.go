package fuzz

import (
	"context"
	"time"

	"github.com/cascade-k8s/cascade/harness/controlplane"
)

// AuditFollower returns a ConcurrentEnv.Audit reading cp's audit log
// incrementally: each call returns the records written since the last.
// kube-apiserver writes the log in blocking mode, so by the time a run has
// gone quiet every request it made is in the file; the follower reads
// until the file has had nothing new for idle.
func AuditFollower(cp *controlplane.ControlPlane, idle time.Duration) (func(context.Context) ([]controlplane.AuditRecord, error), func() error, error) {
	r, err := cp.FollowAudit()
	if err != nil {
		return nil, nil, err
	}
	read := func(ctx context.Context) ([]controlplane.AuditRecord, error) { return r.ReadIdle(ctx, idle) }
	return read, r.Close, nil
}
