package driver

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"

	"github.com/cascade-k8s/cascade/model"
)

// WaitCRDGone waits until the CRD named name (plural.group) is gone from
// storage and discovery no longer lists its resource. apiextensions'
// discovery controller drops a deleted CRD's resource from discovery some
// time after the CRD itself goes, so a GC discovery sync right after the
// cleanup can still find it, and keep its monitor, where the model's sync
// stops it.
func (d *Driver) WaitCRDGone(ctx context.Context, name string) error {
	crds := d.clients[model.PrincipalAdmin].Resource(gvr(crdKindID()))
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := crds.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		return fmt.Errorf("crd/%s is not gone: %w", name, err)
	}
	return d.waitDiscovery(ctx, name, false)
}

// waitDiscovery waits until discovery, read as the GC reads it (the
// aggregated document), lists the resource of the CRD named name
// (plural.group) when served is true, or no longer lists it.
func (d *Driver) waitDiscovery(ctx context.Context, name string, served bool) error {
	plural, group, _ := strings.Cut(name, ".")
	dc, err := discovery.NewDiscoveryClientForConfig(d.configs[model.PrincipalAdmin])
	if err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, lists, err := dc.ServerGroupsAndResources()
		if err != nil && len(lists) == 0 {
			return false, nil
		}
		found := false
		for _, l := range lists {
			if gv, _, _ := strings.Cut(l.GroupVersion, "/"); gv != group {
				continue
			}
			for _, r := range l.APIResources {
				found = found || r.Name == plural
			}
		}
		return found == served, nil
	})
	if err != nil {
		return fmt.Errorf("discovery of crd/%s's resource never became served=%t: %w", name, served, err)
	}
	return nil
}
