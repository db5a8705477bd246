package gc

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// The exact bytes of the GC's patches: a strategic merge patch must never
// carry "ownerReferences":null (which deletes every reference), while a
// JSON merge patch that removes the last reference must.
func TestPatchBodies(t *testing.T) {
	if got := string(deleteOwnerRefsSMP("dep", []types.UID{"o1", "o2"})); got !=
		`{"metadata":{"uid":"dep","ownerReferences":[{"$patch":"delete","uid":"o1"},{"$patch":"delete","uid":"o2"}]}}` {
		t.Errorf("delete SMP: %s", got)
	}
	unblocked := []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "a", UID: "a-uid", BlockOwnerDeletion: ptr.To(false)}}
	if got := string(unblockSMP(Identity{UID: "b"}, unblocked)); got != `{"metadata":{"uid":"b"}}` {
		t.Errorf("unblock SMP without blocking references: %s", got)
	}
	unblocked[0].BlockOwnerDeletion = ptr.To(true)
	if got := string(unblockSMP(Identity{UID: "b"}, unblocked)); got !=
		`{"metadata":{"uid":"b","ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"a","uid":"a-uid","blockOwnerDeletion":false}]}}` {
		t.Errorf("unblock SMP: %s", got)
	}
	if got, _ := jmp("7", nil); string(got) != `{"metadata":{"resourceVersion":"7","ownerReferences":null}}` {
		t.Errorf("JMP removing every reference: %s", got)
	}
}
