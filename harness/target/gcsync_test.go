package target

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// kube-controller-manager's GC sync counts for a CRD once a sync that added
// its resource, with a discovery read after the CRD was created, has
// finished; a sync still running, one of an earlier incarnation of the
// same CRD, or one of another resource does not count.
func TestKCMSyncLogSeesTheSyncThatAddedTheCRD(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kube-controller-manager.log")
	stamp := func(at time.Time) string {
		return at.Format("I0102 15:04:05.000000") + "   4242 garbagecollector.go:220] "
	}
	created := time.Now().Add(-time.Minute).Truncate(time.Microsecond)
	earlier := created.Add(-10 * time.Minute)
	write := func(lines ...string) { appendLog(t, path, lines...) }
	l := newKCMSyncLog(newKCMLog(path))
	if l.Synced("widgets.cascade.dev", created) {
		t.Fatal("synced before the log exists")
	}
	write(
		stamp(earlier)+`"syncing garbage collector with updated resources from discovery" logger="garbage-collector-controller" attempt=1 diff="added: [cascade.dev/v1, Resource=widgets], removed: []"`+"\n",
		stamp(earlier)+`"synced garbage collector" logger="garbage-collector-controller"`+"\n",
		stamp(created.Add(time.Second))+`"syncing garbage collector with updated resources from discovery" logger="garbage-collector-controller" attempt=1 diff="added: [/v1, Resource=pods cascade.dev/v1, Resource=widgets], removed: []"`+"\n",
	)
	if l.Synced("widgets.cascade.dev", created) {
		t.Fatal("an earlier incarnation's sync, or one not finished, counted")
	}
	write(stamp(created.Add(2*time.Second)) + `"synced garbage c`) // half a line
	if l.Synced("widgets.cascade.dev", created) {
		t.Fatal("half a line counted")
	}
	write(`ollector" logger="garbage-collector-controller"` + "\n")
	if !l.Synced("widgets.cascade.dev", created) {
		t.Fatal("the finished sync that added widgets after the CRD was created did not count")
	}
	if l.Synced("herds.cascade.dev", created) {
		t.Fatal("a sync that did not add herds counted for herds")
	}
	if !l.Synced("pods.", created) {
		t.Fatal("a core resource in the same diff was not taken in")
	}
}

// appendLog appends lines to the log file at path, as a process writing
// its log would.
func appendLog(t *testing.T, path string, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, l := range lines {
		if _, err := f.WriteString(l); err != nil {
			t.Fatal(err)
		}
	}
}
