package traces

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestEmbeddedMatchesFiles: the binary carries exactly the trace files of
// the checkout, parsed as ParseFile parses them.
func TestEmbeddedMatchesFiles(t *testing.T) {
	all, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, dir := range []string{DirScenarios, DirRaces, DirCounterexamples} {
		files, err := filepath.Glob(filepath.Join(dir, "*.trace"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			want = append(want, filepath.ToSlash(filepath.Join("traces", f)))
		}
	}
	var got []string
	for _, tr := range all {
		got = append(got, tr.Path)
		rel := tr.Path[len("traces/"):]
		disk, err := os.ReadFile(filepath.FromSlash(rel))
		if err != nil {
			t.Fatal(err)
		}
		if emb, err := files.ReadFile(rel); err != nil || string(emb) != string(disk) {
			t.Errorf("%s: embedded copy differs from the file (%v)", tr.Path, err)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("embedded %v\nfiles    %v", got, want)
	}
	races, err := Embedded(DirRaces)
	if err != nil || len(races) == 0 || ShortName(races[0]) != "race/"+filepath.Base(races[0].Path[:len(races[0].Path)-len(".trace")]) {
		t.Fatalf("Embedded(races): %v %v", races, err)
	}
	if _, err := Embedded("nope"); err == nil {
		t.Fatal("an unknown directory must be an error")
	}
}

// TestFindEmbedded accepts the repository path, the path under traces/
// and the short name.
func TestFindEmbedded(t *testing.T) {
	for _, name := range []string{"traces/races/orphan-adoption.trace", "races/orphan-adoption.trace", "race/orphan-adoption"} {
		tr, err := FindEmbedded(name)
		if err != nil || tr == nil || tr.Path != "traces/races/orphan-adoption.trace" {
			t.Errorf("FindEmbedded(%q) = %v, %v", name, tr, err)
		}
	}
	if tr, err := FindEmbedded("race/nope"); tr != nil || err != nil {
		t.Errorf("FindEmbedded(race/nope) = %v, %v", tr, err)
	}
}
