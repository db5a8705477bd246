package scenarios

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cascade-k8s/cascade/harness/driver"
	"github.com/cascade-k8s/cascade/harness/replay"
	"github.com/cascade-k8s/cascade/impl"
	"github.com/cascade-k8s/cascade/model"
)

// workloadControllers are kube-controller-manager's controllers without its
// garbage collector: the impl target runs cascade's own GC next to them,
// so that adoption and release behave as on upstream.
var workloadControllers = []string{"replicaset", "deployment", "replicationcontroller", "job", "cronjob"}

// steppedImpl replays GC and controller steps one at a time on impl in
// Stepped mode, mapping the trace's keys to the run's real objects.
type steppedImpl struct {
	t *impl.Target
	d *driver.Driver
}

func (s steppedImpl) Settle(ctx context.Context, _ *driver.Driver) error { return s.t.Settle(ctx) }

func (s steppedImpl) Step(ctx context.Context, st model.Step) (model.Result, error) {
	line, err := s.d.RealLine(st.String())
	if err != nil {
		return model.Result{}, err
	}
	writeErr, err := s.t.Step(ctx, line)
	if err != nil {
		return model.Result{}, err
	}
	if writeErr == nil {
		return model.Result{Code: 200}, nil
	}
	var status apierrors.APIStatus
	if errors.As(writeErr, &status) {
		s := status.Status()
		return model.Result{Code: int(s.Code), Reason: string(s.Reason), Message: s.Message}, nil
	}
	return model.Result{}, writeErr
}

var _ replay.Target = steppedImpl{}
