package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestParseCells: -cells and -releases × -datastores give the cells in
// order, without repeats; a bad release or datastore is refused.
func TestParseCells(t *testing.T) {
	cs, err := parseCells("", "v1.33.13, v1.37.2", "etcd,kine", "out")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cs {
		got = append(got, c.release+"/"+c.datastore+"@"+c.out)
	}
	want := "v1.33.13/etcd@out/v1.33.13-etcd v1.33.13/kine@out/v1.33.13-kine v1.37.2/etcd@out/v1.37.2-etcd v1.37.2/kine@out/v1.37.2-kine"
	if strings.Join(got, " ") != want {
		t.Errorf("cells %v, want %s", got, want)
	}
	if cs, err = parseCells("v1.37.2/kine,v1.37.2/kine,v1.31.13/etcd", "ignored", "ignored", "o"); err != nil || len(cs) != 2 || cs[1].release != "v1.31.13" {
		t.Errorf("-cells: %v, %v", cs, err)
	}
	for _, bad := range [][3]string{{"v1.37.2", "", "etcd"}, {"", "1.37", "etcd"}, {"", "v1.37.2", "mysql"}, {"", "", ""}} {
		if _, err := parseCells(bad[0], bad[1], bad[2], "o"); err == nil {
			t.Errorf("parseCells%q: no error", bad)
		}
	}
}

// TestReadReports: a cell's counts come from the gate's summary and fuzz
// JSON files of this run, and the known races are counted by registry ID;
// files older than the cell's start are not read.
func TestReadReports(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now().Add(-time.Second)
	write("summary-upstream.json", `{"upstream":{"passed":35,"failed":1,"errors":0,"skipped":53,"seconds":150}}`)
	write("summary-model.json", `{"model":{"passed":88,"failed":0,"errors":0,"skipped":0}}`)
	write("fuzz-upstream.json", `{"runs":10,"runs_passed":9,"known_races":["kubernetes#114603: gc deleted x","kubernetes#26120: a","kubernetes#114603: gc deleted y"]}`)
	write("fuzz-impl.json", `{"runs":10,"runs_passed":10,"known_races":[]}`)
	old := filepath.Join(dir, "fuzz-impl-stepped.json")
	write("fuzz-impl-stepped.json", `{"runs":5,"runs_passed":5}`)
	if err := os.Chtimes(old, start.Add(-time.Hour), start.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	c := &cell{out: dir}
	readReports(c, start)
	if c.traces != [3]int{123, 1, 53} || c.fuzzRuns != 20 || c.fuzzPass != 19 {
		t.Errorf("traces %v, fuzz %d/%d; want [123 1 53], 19/20", c.traces, c.fuzzPass, c.fuzzRuns)
	}
	if got := knownList(c.known); got != "kubernetes#114603×2, kubernetes#26120×1" {
		t.Errorf("known %q", got)
	}
}

// TestMissingRelease: a cell whose release is not built is that cell's
// error, naming the make command, and the matrix fails.
func TestMissingRelease(t *testing.T) {
	var out bytes.Buffer
	cells := []*cell{{release: "v1.99.0", datastore: "etcd", out: filepath.Join(t.TempDir(), "c")}}
	code := run(t.Context(), config{cells: cells, root: "x", conformBin: "/bin/false"}, &out)
	if code != 1 || !strings.Contains(out.String(), "run make kube KUBE_VERSION=v1.99.0") {
		t.Errorf("exit %d, output:\n%s", code, out.String())
	}
}
