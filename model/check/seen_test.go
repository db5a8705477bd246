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
	tab := newSeenTable(workers, false, 0)
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
				if tab.claim(tab.claimer(w), fps[i], ord, 0) {
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
	tab := newSeenTable(1, false, 0)
	c := tab.claimer(0)
	if !tab.claim(c, 0, 5, 0) || tab.claim(c, 0, 3, 0) || tab.claim(c, 0, 9, 0) {
		t.Fatal("fingerprint 0: want new once")
	}
	if o, ok := tab.get(0); !ok || o != 3 || tab.len() != 1 {
		t.Fatalf("fingerprint 0: ord %d (%v), %d stored", o, ok, tab.len())
	}
	if _, ok := tab.get(42); ok {
		t.Fatal("an absent fingerprint was found")
	}
}

// TestMaskedClaimsORTheAwakeMask: in a masked table every state has an
// awake mask beside it, the OR of its claims' masks, whatever their order
// and whatever the table's growth in between; the state is stored once.
func TestMaskedClaimsORTheAwakeMask(t *testing.T) {
	tab := newSeenTable(1, true, 0)
	defer tab.free()
	c := tab.claimer(0)
	const fp = 0xabcdef12345678
	if !tab.claim(c, fp, 7, 0b0001) {
		t.Fatal("first claim was not new")
	}
	if _, awake, _ := tab.lookup(fp); awake != 0b0001 {
		t.Fatalf("after one claim the awake mask is %b, want 1", awake)
	}
	if tab.claim(c, fp, 9, 0b0100) {
		t.Fatal("the second claim of the same state was new")
	}
	// grow the table past several doublings: the masks move with the slots
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 1<<18; i++ {
		tab.claim(c, rng.Uint64()|1, 100, uint32(i))
	}
	if tab.claim(c, fp, 5, 0) {
		t.Fatal("a later claim of the same state was new")
	}
	ord, awake, ok := tab.lookup(fp)
	if !ok || awake != 0b0101 || ord != 5 {
		t.Fatalf("lookup = %d, %b, %v; want 5, 101, true", ord, awake, ok)
	}
	if !tab.claim(c, 0, 3, 0b10) || tab.claim(c, 0, 2, 0b1) {
		t.Fatal("fingerprint 0: first claim not new or second new")
	}
	if ord, awake, _ := tab.lookup(0); ord != 2 || awake != 0b11 {
		t.Fatalf("fingerprint 0: lookup = %d, %b; want 2, 11", ord, awake)
	}
}

// TestExpectedStatesFitWithoutGrowing: a table sized for n states
// (Options.ExpectStates) holds n random fingerprints in the segments it
// started with, while the same claims make an unsized table double
// again and again; both hold the same states.
func TestExpectedStatesFitWithoutGrowing(t *testing.T) {
	const n = 300000
	sized, unsized := newSeenTable(1, false, n), newSeenTable(1, false, 0)
	defer sized.free()
	defer unsized.free()
	start := sized.tab.Load().segBits
	if start <= initialSegBits {
		t.Fatalf("a table for %d states starts with segments of 2^%d, the unsized size", n, start)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range n {
		fp := rng.Uint64() | 1
		a, b := sized.claim(sized.claimer(0), fp, uint64(i), 0), unsized.claim(unsized.claimer(0), fp, uint64(i), 0)
		if a != b {
			t.Fatalf("claim %d: new in the sized table %v, in the unsized one %v", i, a, b)
		}
	}
	if got := sized.tab.Load().segBits; got != start {
		t.Fatalf("the sized table grew from segments of 2^%d to 2^%d", start, got)
	}
	if got := unsized.tab.Load().segBits; got < start {
		t.Fatalf("the unsized table reached segments of 2^%d, smaller than the sized one's 2^%d: the size is wasteful", got, start)
	}
	if sized.len() != unsized.len() {
		t.Fatalf("the sized table holds %d states, the unsized one %d", sized.len(), unsized.len())
	}
}

// TestExpectStatesChangesNoResult: a search told how many states to
// expect, too few or exactly, finds what it finds without.
func TestExpectStatesChangesNoResult(t *testing.T) {
	want, err := Run(Fanout(5), Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, expect := range []int64{10, want.Distinct} {
		got, err := Run(Fanout(5), Options{Workers: 1, ExpectStates: expect})
		if err != nil {
			t.Fatal(err)
		}
		if got.Distinct != want.Distinct || got.Generated != want.Generated || got.Depth != want.Depth {
			t.Errorf("expecting %d states: %d distinct, %d transitions, depth %d; without: %d, %d, %d",
				expect, got.Distinct, got.Generated, got.Depth, want.Distinct, want.Generated, want.Depth)
		}
	}
	if _, err := Run(Fanout(1), Options{ExpectStates: MaxExpectStates + 1}); err == nil {
		t.Error("an expected state count beyond MaxExpectStates was accepted")
	}
}
