package history_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/cascade-k8s/cascade/harness/history"
)

// TestNamespaceKeptBySpecFinalizers: a Namespace deleted in the foreground
// carries foregroundDeletion in metadata.finalizers and "kubernetes" in
// spec.finalizers. The garbage collector's patch that removes
// foregroundDeletion, sent through its metadata client, is answered with a
// PartialObjectMetadata, which has no spec: the answer shows the object
// being deleted with no finalizers, yet the Namespace stays (no namespace
// controller runs here to empty spec.finalizers). The history must read
// that answer as a write that kept the Namespace, not as its removal, and
// a later write to the Namespace must then linearize.
func TestNamespaceKeptBySpecFinalizers(t *testing.T) {
	controlPlane(t)
	ctx, cs := context.Background(), clientFor(t, driver)
	s, _ := newScope(t, cs)
	nss := cs.CoreV1().Namespaces()
	name := s.Prefix + "-fg"
	if _, err := nss.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := nss.Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	var last *corev1.Namespace
	if err := wait.PollUntilContextTimeout(ctx, poll, timeout, true, func(ctx context.Context) (bool, error) {
		n, err := nss.Get(ctx, name, metav1.GetOptions{})
		last = n
		return err == nil && len(n.Finalizers) == 0, nil
	}); err != nil {
		t.Fatalf("the garbage collector never removed foregroundDeletion from %s: %+v", name, last)
	}
	if len(last.Spec.Finalizers) == 0 || last.DeletionTimestamp == nil {
		t.Fatalf("want %s Terminating, held by spec.finalizers: %+v", name, last)
	}
	if _, err := nss.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"labels":{"after":"gc"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	ops := auditHistory(t, s)
	var gcPatches, removals int
	for _, op := range ops {
		if op.Kind.Info().Kind != "Namespace" || op.Name != name || !op.OK() {
			continue
		}
		if op.Actor == history.ActorGC && op.Verb == history.Patch {
			gcPatches++
		}
		if op.Removed {
			removals++
			t.Errorf("%s read as removing the Namespace; it stays, held by spec.finalizers", op.String())
		}
	}
	if gcPatches == 0 {
		t.Fatalf("no patch of the garbage collector's on %s in the history", name)
	}
	expectLinearizable(t, ops)
}
