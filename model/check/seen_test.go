package check

import (
	"math/rand/v2"
	"sync"
	"testing"
)

// TestSeenTableConcurrentClaims: workers claiming overlapping fingerprints
// with random ords, while the table grows several times under them, leave
// each fingerprint with the smallest ord offered, and exactly one claim
// per fingerprint reports it new.
func TestSeenTableConcurrentClaims(t *testing.T) {
	const workers, distinct, claims = 4, 50000, 40000
	fps := make([]uint64, distinct)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range fps {
		fps[i] = rng.Uint64() | 1 // no zero here; TestSeenTableZero has it
	}
	fps[7] = fps[3] // a repeated fingerprint is one state
	tab := newSeenTable(workers, false)
	best := make([][]uint64, workers) // per worker: smallest ord it offered per fp
	fresh := make([]int, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 9))
			mine := make([]uint64, distinct)
			for i := range mine {
				mine[i] = ^uint64(0)
			}
			for range claims {
				i := r.IntN(distinct)
				ord := r.Uint64() >> 1
				if tab.claim(tab.claimer(w), fps[i], ord) {
					fresh[w]++
				}
				mine[i] = min(mine[i], ord)
			}
			best[w] = mine
		}(w)
	}
	wg.Wait()
	seen := map[uint64]uint64{}
	for i, fp := range fps {
		for w := range workers {
			if best[w][i] != ^uint64(0) {
				if o, ok := seen[fp]; !ok || best[w][i] < o {
					seen[fp] = best[w][i]
				}
			}
		}
	}
	total := 0
	for _, n := range fresh {
		total += n
	}
	if total != len(seen) || tab.len() != len(seen) {
		t.Fatalf("%d claims reported new, table holds %d, %d fingerprints were claimed", total, tab.len(), len(seen))
	}
	for fp, want := range seen {
		if got, ok := tab.get(fp); !ok || got != want {
			t.Fatalf("fingerprint %x: ord %d (%v), want %d", fp, got, ok, want)
		}
	}
	if got := tab.tab.Load().segBits; got == initialSegBits {
		t.Fatalf("the table never grew (segments of 2^%d)", got)
	}
}

// TestSeenTableZero: fingerprint 0, which marks empty slots, is a state
// like any other.
func TestSeenTableZero(t *testing.T) {
	tab := newSeenTable(1, false)
	c := tab.claimer(0)
	if !tab.claim(c, 0, 5) || tab.claim(c, 0, 3) || tab.claim(c, 0, 9) {
		t.Fatal("fingerprint 0: want new once")
	}
	if o, ok := tab.get(0); !ok || o != 3 || tab.len() != 1 {
		t.Fatalf("fingerprint 0: ord %d (%v), %d stored", o, ok, tab.len())
	}
	if _, ok := tab.get(42); ok {
		t.Fatal("an absent fingerprint was found")
	}
}

// TestFlaggedClaimsORTheFlag: in a flagged table bit 0 is not part of a
// state's identity; the state is stored once, and its flag is set as
// soon as one claim sets it, whatever the order of the claims.
func TestFlaggedClaimsORTheFlag(t *testing.T) {
	tab := newSeenTable(1, true)
	defer tab.free()
	c := tab.claimer(0)
	asleep, awake := flagFingerprint(0xabcdef12345678, false), flagFingerprint(0xabcdef12345678, true)
	if !tab.claim(c, asleep, 7) {
		t.Fatal("first claim was not new")
	}
	if _, fp, _ := tab.lookup(awake); fp != asleep {
		t.Fatalf("after an asleep claim the stored fingerprint is %x, want %x", fp, asleep)
	}
	if tab.claim(c, awake, 9) {
		t.Fatal("the awake claim of the same state was new")
	}
	ord, fp, ok := tab.lookup(asleep)
	if !ok || fp != awake || ord != 7 {
		t.Fatalf("lookup = %d, %x, %v; want 7, %x, true", ord, fp, ok, awake)
	}
	if tab.claim(c, asleep, 5) || tab.len() != 1 {
		t.Fatalf("a later asleep claim was new or added a state: %d states", tab.len())
	}
	if ord, fp, _ := tab.lookup(asleep); fp != awake || ord != 5 {
		t.Fatalf("a later asleep claim cleared the flag or lost the smaller ord: %d, %x", ord, fp)
	}
}
