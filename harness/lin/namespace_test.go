package lin

import (
	"testing"

	"github.com/cascade-k8s/cascade/harness/history"
	"github.com/cascade-k8s/cascade/model"
)

// TestTerminatingNamespaceDelete: a Namespace is held by its
// spec.finalizers once Terminating, so the GC's patch removing
// foregroundDeletion keeps it, and a second DELETE changes nothing: the
// Namespace registry chooses the GC finalizers only on the first DELETE
// and then answers the Namespace as it is, whatever the options (found by
// fuzzing the kubeconfig target: a second Foreground DELETE answered 200
// without foregroundDeletion). A second DELETE that answers with the
// finalizer added is not what the API server does.
func TestTerminatingNamespaceDelete(t *testing.T) {
	build := func() *builder {
		b := newBuilder(t)
		ns := key("ns", "d")
		b.create("client-0", ns, 0, 10, nil)
		b.del("client-1", ns, 20, 30, "Foreground")
		b.write("gc", ns, 40, 50, withoutFinalizer(model.FinalizerForeground))
		return b
	}
	secondDelete := func(b *builder, change func(*history.Object)) int {
		got := *b.live[key("ns", "d")]
		change(&got)
		return b.add(history.Op{Actor: "client-1", Verb: history.Delete, Kind: got.Kind, Name: got.Name,
			Delete: &history.DeleteOptions{Propagation: "Foreground"}, Code: 200, Got: &got, Call: 60, Return: 70})
	}
	b := build()
	secondDelete(b, func(*history.Object) {})
	expectOk(t, b.check())

	b = build()
	i := secondDelete(b, func(o *history.Object) { o.Finalizers, o.RV = []string{model.FinalizerForeground}, b.nextRV() })
	expectIllegal(t, b.check(), i, "the delete left finalizers [foregroundDeletion]")
}

// TestNamespaceDeleteRead: the Namespace registry's Delete
// (pkg/registry/core/namespace/storage/storage.go REST.Delete) GETs the
// Namespace and decides on that read whether this is the first DELETE;
// the first sets the GC finalizers its options call for inside a
// GuaranteedUpdate on the current version. Two DELETEs sent before either
// landed both read the Namespace not yet Terminating, so the second
// re-chooses the finalizers on the deletion the first started (found by
// fuzzing upstream v1.33.13, seed 5: an Orphan and a Foreground DELETE of
// one Namespace answered [orphan] and then [foregroundDeletion]). The
// race is known only when the DELETE that started the deletion returned
// after this one was sent; once it had returned, a second DELETE changes
// nothing (TestTerminatingNamespaceDelete).
func TestNamespaceDeleteRead(t *testing.T) {
	build := func(secondCall, secondReturn int64) (*builder, int) {
		b := newBuilder(t)
		ns := key("ns", "d")
		b.create("client-0", ns, 0, 10, nil)
		b.del("client-0", ns, 20, 32, "Orphan")
		got := *b.live[ns]
		got.Finalizers, got.RV = []string{model.FinalizerForeground}, b.nextRV()
		b.live[ns] = &got
		return b, b.add(history.Op{Actor: "client-1", Verb: history.Delete, Kind: got.Kind, Name: got.Name,
			Delete: &history.DeleteOptions{Propagation: "Foreground"}, Code: 200, Got: &got, Call: secondCall, Return: secondReturn})
	}
	b, second := build(25, 40)
	expectKnown(t, b.check(), second, model.KnownNamespaceDeleteRead)

	b, second = build(35, 45)
	expectIllegal(t, b.check(), second, "the delete left finalizers [foregroundDeletion]")
}
