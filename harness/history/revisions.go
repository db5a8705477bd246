package history

import (
	"cmp"
	"math"
	"slices"
	"sort"
)

// revisionBounds bounds when revisions were written, from the order of
// etcd's revisions. kube-apiserver's resourceVersions are the revisions
// of one etcd (Object.RV), and etcd numbers its writes in the order it
// applies them, so a revision was written after every smaller one and
// before every larger one. What is known of any revision then bounds all
// the others:
//
//   - a revision known not to have been written before an instant T
//     (the Call of the recorded op that wrote it, or the lower bound of an
//     Observed op's write) puts every larger revision's write after T;
//   - a revision known to exist at an instant T (an event received, an
//     answer returned) puts every smaller revision's write before T.
//
// On a busy cluster the driver's own writes are everywhere in the
// revision sequence, and these bounds pin a write seen only by watch to
// the stretch between the driver's neighbouring requests, where the
// watch alone leaves it anywhere after the object's previous write,
// seconds earlier (or since the observer started, for an object a
// controller created): the uncertain intervals that made the checker's
// search blow up on kubeconfig histories (issue 20).
type revisionBounds struct {
	notBefore []revAt // by rv; at is the prefix maximum
	existed   []revAt // by rv; at is the suffix minimum
}

// revAt is a revision and an instant.
type revAt struct {
	rv uint64
	at int64
}

// newRevisionBounds builds the bounds from writtenAfter, revisions each
// written no earlier than its instant, and existedBy, revisions each
// existing by its instant.
func newRevisionBounds(writtenAfter, existedBy []revAt) *revisionBounds {
	b := &revisionBounds{notBefore: slices.Clone(writtenAfter), existed: slices.Clone(existedBy)}
	byRV := func(x, y revAt) int { return cmp.Compare(x.rv, y.rv) }
	slices.SortFunc(b.notBefore, byRV)
	for i := 1; i < len(b.notBefore); i++ {
		b.notBefore[i].at = max(b.notBefore[i].at, b.notBefore[i-1].at)
	}
	slices.SortFunc(b.existed, byRV)
	for i := len(b.existed) - 2; i >= 0; i-- {
		b.existed[i].at = min(b.existed[i].at, b.existed[i+1].at)
	}
	return b
}

// after returns an instant the write of revision rv came after: the
// latest lower bound of a smaller revision's write (math.MinInt64 if
// none is known).
func (b *revisionBounds) after(rv uint64) int64 {
	i := sort.Search(len(b.notBefore), func(i int) bool { return b.notBefore[i].rv >= rv })
	if i == 0 {
		return math.MinInt64
	}
	return b.notBefore[i-1].at
}

// by returns an instant the write of revision rv came before: the
// earliest a revision as large is known to have existed at
// (math.MaxInt64 if none is known).
func (b *revisionBounds) by(rv uint64) int64 {
	i := sort.Search(len(b.existed), func(i int) bool { return b.existed[i].rv >= rv })
	if i == len(b.existed) {
		return math.MaxInt64
	}
	return b.existed[i].at
}

// wroteRevision reports whether the recorded op certainly wrote the
// revision it answered, so that the revision was written after its Call:
// a successful create; an update, patch or DELETE that checked a
// resourceVersion precondition and answered another revision (had it
// changed nothing, it would answer the version it was checked against);
// a DELETE marked Removed at the revision of the object's DELETED event
// (see ObservedOps). Other answers may be no-ops that show a revision
// another actor wrote earlier.
func wroteRevision(op *Op, deletedAt map[string]uint64) bool {
	if !op.OK() || op.Got == nil || op.Got.RV == 0 {
		return false
	}
	switch {
	case op.Verb == Create:
		return true
	case op.Removed:
		rv, ok := deletedAt[op.Got.UID]
		return op.Verb == Delete && ok && rv == op.Got.RV
	}
	pre, ok := op.preconditionRV()
	return ok && op.Got.RV > pre
}
