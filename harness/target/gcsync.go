package target

import (
	"regexp"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The GC takes in a CRD created after the control plane started only at
// its next discovery sync: kube-controller-manager's every 30 s (a
// constant in startGarbageCollectorController, with no flag), impl's
// every gc.Options.SyncPeriod. Settling after a CRD was created waits for
// that sync (replay.Quiet.Synced) rather than for a whole period when the
// target can tell it happened: impl by its monitors, kube-controller-manager
// by the two lines its GarbageCollector.Sync logs at --v=2,
//
//	"syncing garbage collector with updated resources from discovery" attempt=1 diff="added: [cascade.dev/v1, Resource=widgets], removed: []"
//	"synced garbage collector"
//
// the first after its discovery read, the second once the new monitors
// have synced (its workers resume then).
var (
	kcmSyncing  = regexp.MustCompile(`"syncing garbage collector with updated resources from discovery".* diff="added: \[([^\]]*)\]`)
	kcmSynced   = regexp.MustCompile(`"synced garbage collector"`)
	kcmResource = regexp.MustCompile(`(\S*)/[^\s/]+, Resource=([^\s\]]+)`)
	// klog's header: Lmmdd hh:mm:ss.uuuuuu
	klogTime = regexp.MustCompile(`^[IWEF](\d{4} \d{2}:\d{2}:\d{2}\.\d{6}) `)
)

// kcmSyncLog follows kube-controller-manager's log for the GC's discovery
// syncs.
type kcmSyncLog struct {
	log     *kcmLog
	mu      sync.Mutex
	pending map[schema.GroupResource]time.Time   // added by a sync not yet finished, and when
	synced  map[schema.GroupResource][]time.Time // when each finished sync that added it began
}

func newKCMSyncLog(log *kcmLog) *kcmSyncLog {
	l := &kcmSyncLog{log: log, pending: map[schema.GroupResource]time.Time{}, synced: map[schema.GroupResource][]time.Time{}}
	log.parse(l.line)
	return l
}

// Synced reports whether a finished GC sync added the CRD named
// (plural.group) with a discovery read after since.
func (l *kcmSyncLog) Synced(crd string, since time.Time) bool {
	l.log.read()
	l.mu.Lock()
	defer l.mu.Unlock()
	plural, group, _ := strings.Cut(crd, ".")
	for _, at := range l.synced[schema.GroupResource{Group: group, Resource: plural}] {
		if !at.Before(since) {
			return true
		}
	}
	return false
}

func (l *kcmSyncLog) line(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if m := kcmSyncing.FindStringSubmatch(s); m != nil {
		at, ok := klogStamp(s)
		if !ok {
			return
		}
		// each added resource prints as "cascade.dev/v1, Resource=widgets"
		// (schema.GroupVersionResource.String; the core group is empty)
		for _, r := range kcmResource.FindAllStringSubmatch(m[1], -1) {
			l.pending[schema.GroupResource{Group: r[1], Resource: r[2]}] = at
		}
		return
	}
	if kcmSynced.MatchString(s) {
		for gr, at := range l.pending {
			l.synced[gr] = append(l.synced[gr], at)
		}
		clear(l.pending)
	}
}

// klogStamp reads a klog line's time (local, without a year: the year of
// now, or the one before if that would put it in the future).
func klogStamp(s string) (time.Time, bool) {
	m := klogTime.FindStringSubmatch(s)
	if m == nil {
		return time.Time{}, false
	}
	now := time.Now()
	t, err := time.ParseInLocation("2006 0102 15:04:05.000000", now.Format("2006")+" "+m[1], time.Local)
	if err != nil {
		return time.Time{}, false
	}
	if t.After(now.Add(24 * time.Hour)) {
		t = t.AddDate(-1, 0, 0)
	}
	return t, true
}
