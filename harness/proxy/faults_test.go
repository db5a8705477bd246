package proxy_test

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cascade-k8s/cascade/harness/proxy"
)

// withFaults puts f on the shared proxy for one test.
func withFaults(t *testing.T, f proxy.Faults) *proxy.FaultController {
	t.Helper()
	c := proxy.NewFaults(f)
	sw.set(c)
	t.Cleanup(func() { sw.set(nil) })
	px.Take()
	return c
}

// awaitIdle waits until the proxy holds nothing.
func awaitIdle(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !px.Idle(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the proxy still holds traffic %s on", timeout)
		}
	}
}

// --informer-lag on the real binary: each event of the namespace's
// objects is handed to the controller manager's informers up to the lag
// late, each stream's in order, and the GC still collects.
func TestInformerLagHoldsEventsInOrder(t *testing.T) {
	needControlPlane(t)
	withFaults(t, proxy.Faults{Lag: 300 * time.Millisecond, Seed: 1})
	ns := namespace(t)
	collected(t, ns, 3)
	awaitIdle(t)
	ev := px.Take()
	var held []time.Duration
	byStream := map[int64][]proxy.Delivery{}
	for _, d := range ev.Deliveries {
		if d.Namespace != ns || d.Delivered.IsZero() {
			continue
		}
		held = append(held, d.Held())
		byStream[d.Stream] = append(byStream[d.Stream], d)
	}
	if len(held) < 5 {
		t.Fatalf("only %d events of namespace %s handed on", len(held), ns)
	}
	if m := slices.Max(held); m < 50*time.Millisecond || m > 300*time.Millisecond+time.Second {
		t.Errorf("the longest hold was %s; want some hold of at least 50ms under a 300ms lag, none far beyond it", m)
	}
	for id, ds := range byStream {
		for i := 1; i < len(ds); i++ {
			if ds[i].Received.Before(ds[i-1].Received) || ds[i].Delivered.Before(ds[i-1].Delivered) {
				t.Errorf("stream %d handed %s %s (received %s) after %s %s (received %s): out of order",
					id, ds[i].Type, ds[i].Name, ds[i].Received.Format(time.StampMicro), ds[i-1].Type, ds[i-1].Name, ds[i-1].Received.Format(time.StampMicro))
			}
		}
	}
}

// --write-delay on the real binary: the GC's writes wait up to the delay
// before the proxy passes them on, and the GC still collects.
func TestWriteDelayHoldsGCWrites(t *testing.T) {
	needControlPlane(t)
	withFaults(t, proxy.Faults{WriteDelay: 400 * time.Millisecond, Seed: 2})
	ns := namespace(t)
	collected(t, ns, 3)
	awaitIdle(t)
	dels := gcDeletes(px.Take(), ns)
	if len(dels) != 3 {
		t.Fatalf("%d GC DELETEs of the namespace's dependents recorded, want 3", len(dels))
	}
	var longest time.Duration
	for _, r := range dels {
		longest = max(longest, r.Held())
		if r.Held() > 400*time.Millisecond+time.Second {
			t.Errorf("GC DELETE of %s held %s, far beyond the 400ms delay", r.Name, r.Held())
		}
	}
	if longest < 40*time.Millisecond {
		t.Errorf("the GC's DELETEs were held %s at most; want some hold of at least 40ms under a 400ms delay", longest)
	}
}

// --informer-relist on the real binary: the proxy ends an informer's
// watch with 410 Expired, the controller manager's informer lists again
// (the proxy holding that list until the gap ends), and the GC still
// collects what was deleted in between.
func TestInformerRelistMakesKCMRelist(t *testing.T) {
	needControlPlane(t)
	fc := withFaults(t, proxy.Faults{Relist: 3 * time.Second, Seed: 3})
	ns := namespace(t)
	ctx := context.Background()
	// ConfigMap events until the relist fault breaks the informer's
	// watch (one chance in four per event)
	var brk proxy.Delivery
	for i := 0; ; i++ {
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "churn-"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		ev := px.Evidence()
		j := slices.IndexFunc(ev.Deliveries, func(d proxy.Delivery) bool {
			return d.Fault == "relist" && d.Type == "ERROR" && d.Informer == gcConfigMaps
		})
		if j >= 0 {
			brk = ev.Deliveries[j]
			break
		}
		if i > 200 {
			t.Fatalf("no watch of %s broken after 200 ConfigMap events", gcConfigMaps)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if fc.Pending() == 0 && !relisted(px.Evidence(), brk) {
		t.Fatalf("the relist fault broke %s's watch but neither awaits its relist nor saw it", gcConfigMaps)
	}
	collected(t, ns, 1) // the GC works on: its informer listed again
	awaitIdle(t)
	if !relisted(px.Evidence(), brk) {
		t.Fatalf("%s did not list again after its watch was broken at %s", gcConfigMaps, brk.Delivered.Format(time.StampMicro))
	}
}

// relisted reports whether the informer of the break brk listed again
// after it (a LIST, or a watch sending its initial events).
func relisted(ev proxy.Evidence, brk proxy.Delivery) bool {
	return slices.ContainsFunc(ev.Requests, func(r proxy.Request) bool {
		return r.Relist() && r.Informer(r.Client) == brk.Informer && r.Received.After(brk.Delivered) && r.Code == 200
	}) || slices.ContainsFunc(ev.Deliveries, func(d proxy.Delivery) bool {
		return d.Informer == brk.Informer && d.Stream != brk.Stream && d.Received.After(brk.Delivered) && d.InitialEventsEnd
	})
}
