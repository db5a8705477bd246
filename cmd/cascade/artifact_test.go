package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOutputNeverReplacesAUsersFile: cascade replaces the files it wrote
// on an earlier run, and refuses, naming the file and keeping it, one it
// did not write or that was changed since.
func TestOutputNeverReplacesAUsersFile(t *testing.T) {
	dir := t.TempDir()
	args := []string{"check", "--preset", "orphan-adoption", "--bug", "adopt-without-recheck", "--out", dir, "-q"}
	file := filepath.Join(dir, "orphan-adoption-adopt-without-recheck-orphan-respected.trace")
	for run := 1; run <= 2; run++ {
		if out, code := cascade(t, args...); code != 1 || strings.Contains(out, "cannot write") {
			t.Fatalf("run %d: exit %d, want 1 (a violation) and no error:\n%s", run, code, out)
		}
	}
	page := filepath.Join(dir, "notes.html")
	if err := os.WriteFile(page, []byte("<p>mine</p>"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := cascade(t, "render", file, "--html", page)
	if code != 2 || !strings.Contains(out, page+" exists and cascade did not write it") {
		t.Fatalf("render onto a user's file: exit %d:\n%s", code, out)
	}
	if got, _ := os.ReadFile(page); string(got) != "<p>mine</p>" {
		t.Errorf("the user's page now reads %q", got)
	}

	mine := []byte("# my minimised copy\n")
	if err := os.WriteFile(file, mine, 0o644); err != nil {
		t.Fatal(err)
	}
	out, code = cascade(t, args...)
	if code != 2 || !strings.Contains(out, "error: cannot write counterexample: "+file+" exists and it changed since cascade wrote it") {
		t.Fatalf("exit %d, want an error naming %s:\n%s", code, file, out)
	}
	if !strings.Contains(out, "VIOLATED in 8 steps") || !strings.Contains(out, "controller adopt rs/web-1 by=deploy/web") {
		t.Errorf("the verdict and the counterexample are not printed when the file is refused:\n%s", out)
	}
	if got, _ := os.ReadFile(file); string(got) != string(mine) {
		t.Errorf("the edited trace now reads %q", got)
	}
}

// TestReportPathsCheckedBeforeTheRun: a report path holding a user's file
// is refused before any work, with a usage error naming it.
func TestReportPathsCheckedBeforeTheRun(t *testing.T) {
	dir := t.TempDir()
	junit := filepath.Join(dir, "junit.xml")
	if err := os.WriteFile(junit, []byte("<mine/>"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := cascade(t, "conform", "--target", "model", "--labels", "orphan", "-q", "--junit", junit)
	if code != 2 || !strings.Contains(out, junit+" exists and cascade did not write it") || strings.Contains(out, "passed") {
		t.Fatalf("exit %d, want a usage error before the run:\n%s", code, out)
	}
	summary := filepath.Join(dir, "fuzz", "summary.txt")
	if err := os.MkdirAll(filepath.Dir(summary), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(summary, []byte("my notes"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code = cascade(t, "fuzz", "--target", "impl", "--out", filepath.Dir(summary))
	if code != 2 || !strings.Contains(out, "--out: "+summary+" exists and cascade did not write it") {
		t.Fatalf("exit %d, want a usage error before the target starts:\n%s", code, out)
	}
	for path, want := range map[string]string{junit: "<mine/>", summary: "my notes"} {
		if got, _ := os.ReadFile(path); string(got) != want {
			t.Errorf("%s now reads %q", path, got)
		}
	}
}

// TestCampaignRunChecksShardFilesFirst: a shard file in --out that cascade
// did not write stops campaign run before it creates anything.
func TestCampaignRunChecksShardFilesFirst(t *testing.T) {
	dir := t.TempDir()
	shard := filepath.Join(dir, "shard-1.json")
	if err := os.WriteFile(shard, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := cascade(t, "campaign", "run", "--kubeconfig", kubeconfig, "--image", "cascade:dev", "--shards", "2", "--out", dir, "--", "--target", "impl")
	if code != 2 || !strings.Contains(out, "--out: "+shard+" exists and cascade did not write it") {
		t.Fatalf("exit %d, want a usage error naming %s:\n%s", code, shard, out)
	}
	// with no such file, the unreachable cluster is the one-line usage
	// error, and the missing --out directory is not made
	fresh := filepath.Join(dir, "fresh")
	out, code = cascade(t, "campaign", "run", "--kubeconfig", kubeconfig, "--image", "cascade:dev", "--shards", "2", "--out", fresh, "--", "--target", "impl")
	if code != 2 || !strings.Contains(out, "cannot reach the cluster of") {
		t.Fatalf("an unreachable cluster: exit %d:\n%s", code, out)
	}
	if _, err := os.Stat(fresh); err == nil {
		t.Errorf("campaign run made %s for a campaign that never started", fresh)
	}
}
