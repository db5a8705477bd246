package model

import (
	"slices"
	"testing"
)

// TestPreconditionAnswers pins which statuses a write's preconditions
// allow, and the one the model gives (Answers.Code).
func TestPreconditionAnswers(t *testing.T) {
	var sem Semantics
	cases := []struct {
		name   string
		verb   WriteVerb
		stored bool
		pre    Preconditions
		noOp   bool
		want   Answers
		code   int
	}{
		{"no object: NotFound", VerbUpdate, false, Preconditions{}, false, AnswerNotFound, 404},
		{"preconditions hold: the write goes ahead", VerbUpdate, true, Preconditions{UID: Holds, RV: Holds}, false, AnswerOK, 200},
		{"a patch's uid fails: Invalid (immutable), Conflict or NotFound", VerbUpdate, true, Preconditions{UID: Fails}, false,
			AnswerInvalid | AnswerConflict | AnswerNotFound, 422},
		{"a DELETE's uid fails: Conflict or NotFound", VerbDelete, true, Preconditions{UID: Fails}, false, AnswerConflict | AnswerNotFound, 409},
		{"rv fails without a uid precondition: Conflict only", VerbUpdate, true, Preconditions{RV: Fails}, false, AnswerConflict, 409},
		{"rv fails on an update that changes nothing: also 2xx (etcd3 no-op)", VerbUpdate, true, Preconditions{RV: Fails}, true, AnswerOK | AnswerConflict, 200},
		{"no no-op exception for a DELETE", VerbDelete, true, Preconditions{RV: Fails}, true, AnswerConflict, 409},
		{"an unknown uid allows either outcome", VerbDelete, true, Preconditions{UID: Unknown}, false, AnswerOK | AnswerConflict | AnswerNotFound, 200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := PreconditionAnswers(sem, c.verb, c.stored, c.pre, c.noOp)
			if got != c.want || got.Code() != c.code {
				t.Errorf("answers %04b (code %d), want %04b (code %d)", got, got.Code(), c.want, c.code)
			}
		})
	}
}

// TestPreconditionAnswersPerRelease: before kubernetes#132470 (v1.34.0)
// a PUT carrying the uid of a removed object answers 409 Conflict, so an
// update with a uid precondition on no object may answer Conflict as
// well as NotFound (a PATCH still answers 404); from v1.34 only 404.
func TestPreconditionAnswersPerRelease(t *testing.T) {
	for _, c := range []struct {
		release string
		pre     Preconditions
		verb    WriteVerb
		want    Answers
	}{
		{"v1.33.13", Preconditions{UID: Fails}, VerbUpdate, AnswerNotFound | AnswerConflict},
		{"v1.33.13", Preconditions{}, VerbUpdate, AnswerNotFound},
		{"v1.33.13", Preconditions{UID: Fails}, VerbDelete, AnswerNotFound},
		{"v1.34.0", Preconditions{UID: Fails}, VerbUpdate, AnswerNotFound},
		{"v1.37.2", Preconditions{UID: Fails}, VerbUpdate, AnswerNotFound},
	} {
		r, err := ParseRelease(c.release)
		if err != nil {
			t.Fatal(err)
		}
		if got := PreconditionAnswers(Semantics{}.For(r), c.verb, false, c.pre, false); got != c.want {
			t.Errorf("%s, verb %d, %+v on no object: answers %04b, want %04b", c.release, c.verb, c.pre, got, c.want)
		}
	}
}

// TestUpdateDenialFinalizerAfterDeletion: a finalizer added to an object
// being deleted is refused, unless the semantics are those before
// kubernetes#32354.
func TestUpdateDenialFinalizerAfterDeletion(t *testing.T) {
	cm, _ := KindByShort("cm")
	old := View{Kind: cm, Deleting: true, Finalizers: []string{"cascade.dev/a"}}
	next := View{Kind: cm, Deleting: true, Finalizers: []string{"cascade.dev/a", "cascade.dev/b"}}
	if d := UpdateDenial(Semantics{}, &old, &next); d.Property != PropNoFinalizerAfterDeletion {
		t.Errorf("denial %+v, want one under %q", d, PropNoFinalizerAfterDeletion)
	}
	if d := UpdateDenial(Semantics{FinalizerAfterDeletion: true}, &old, &next); d.Message != "" {
		t.Errorf("with FinalizerAfterDeletion: denied %q", d.Message)
	}
	if !UpdateRemoves(&View{Kind: cm, Deleting: true}) || UpdateRemoves(&old) || UpdateRemoves(&View{Kind: cm}) {
		t.Error("an update removes exactly an object it leaves being deleted without finalizers")
	}
}

// TestDeleteResult pins what a DELETE leaves per kind.
func TestDeleteResult(t *testing.T) {
	kind := func(s string) KindID { k, _ := KindByShort(s); return k }
	orphan := DeleteOptions{Policy: Orphan}
	cases := []struct {
		name string
		o    View
		opts DeleteOptions
		want DeleteResult
	}{
		{"a bare ConfigMap goes at once", View{Kind: kind("cm")}, DeleteOptions{}, DeleteResult{Removed: true}},
		{"Orphan leaves orphan on", View{Kind: kind("cm")}, orphan, DeleteResult{Finalizers: []string{FinalizerOrphan}}},
		{"a ReplicationController orphans by default", View{Kind: kind("rc")}, DeleteOptions{}, DeleteResult{Finalizers: []string{FinalizerOrphan}}},
		{"a bare Pod goes in two writes, or stays for a grace period", View{Kind: kind("pod")}, DeleteOptions{},
			DeleteResult{Removed: true, TwoWrites: true, MayKeep: true}},
		{"a Pod being deleted may be answered unchanged", View{Kind: kind("pod"), Deleting: true, Finalizers: []string{"cascade.dev/a"}}, DeleteOptions{},
			DeleteResult{Finalizers: []string{"cascade.dev/a"}, MayKeep: true, MayAnswerUnchanged: true}},
		{"a Namespace keeps its kubernetes finalizer", View{Kind: kind("ns")}, DeleteOptions{},
			DeleteResult{Finalizers: []string{FinalizerNamespace}, MayKeep: true}},
		{"a CRD's first DELETE only adds the cleanup finalizer", View{Kind: kind("crd")}, orphan,
			DeleteResult{Finalizers: []string{FinalizerCRDCleanup}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Delete(Semantics{}, &c.o, c.opts)
			if !slices.Equal(got.Finalizers, c.want.Finalizers) || got.Removed != c.want.Removed || got.TwoWrites != c.want.TwoWrites ||
				got.MayKeep != c.want.MayKeep || got.MayAnswerUnchanged != c.want.MayAnswerUnchanged {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}
