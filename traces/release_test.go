package traces

import (
	"errors"
	"strings"
	"testing"

	"github.com/cascade-k8s/cascade/model"
)

// Releases on either side of every model.ReleaseChanges entry the model
// reads, each replayed below.
var releasesUnderTest = []string{"v1.33.13", "v1.34.4", "v1.36.3", "v1.37.2"}

// TestReleaseTraces: a trace with a `# releases:` header replays as it
// expects on every release under test it holds for, and replayed on one
// it does not hold for (its header ignored) it differs: the release, not
// the trace, decides the outcome. Each release difference the model
// reads has such a pair (kubernetes-114603 and its -fixed twin for
// ChangeGCDeleteRV, gc-delete-notfound and its -requeued twin for
// ChangeGCDeleteNotFoundVirtual).
func TestReleaseTraces(t *testing.T) {
	dependent := map[string]bool{}
	for _, path := range traceFiles(t) {
		tr, err := ParseFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rr, err := tr.Releases()
		if err != nil {
			t.Fatal(err)
		}
		if _, apart, _ := tr.KCMReleases(); rr.All() || apart {
			continue // a skewed control plane's trace: TestSkewedReleaseHeaders
		}
		var in, out int
		for _, v := range releasesUnderTest {
			r, err := model.ParseRelease(v)
			if err != nil {
				t.Fatal(err)
			}
			if !rr.Contains(r) {
				out++
				if _, _, err := ReplayOn(tr, r); !errors.As(err, new(*NotForRelease)) {
					t.Errorf("%s on %s: got %v, want a NotForRelease error", path, v, err)
				}
				results, _, err := ReplayIgnoringReleases(tr, r)
				if err == nil && Diff(tr, results) == nil {
					t.Errorf("%s holds on %s too, outside its releases (%s): the header claims a difference the model does not make", path, v, rr)
				}
				continue
			}
			in++
			results, _, err := ReplayOn(tr, r)
			if err != nil {
				t.Fatalf("%s on %s: %v", path, v, err)
			}
			if err := Diff(tr, results); err != nil {
				t.Errorf("on %s: %v", v, err)
			}
		}
		if in == 0 || out == 0 {
			t.Errorf("%s: releases %s leave no release under test on one side", path, rr)
		}
		dependent[path] = true
	}
	for _, want := range []string{"races/kubernetes-114603.trace", "races/kubernetes-114603-fixed.trace"} {
		if !dependent[want] {
			t.Errorf("%s has no releases header", want)
		}
	}
}

// TestReleasesHeader: the header's forms, and a malformed one is an
// error at its line.
func TestReleasesHeader(t *testing.T) {
	for _, c := range []struct{ header, in, out string }{
		{"<=v1.33", "v1.33.13", "v1.34.0"},
		{">=v1.34", "v1.34.0", "v1.33.13"},
		{"v1.30..v1.33", "v1.30.0", "v1.34.4"},
		{"<=v1.33.5", "v1.33.5", "v1.33.6"},
	} {
		tr, err := Parse("h.trace", strings.NewReader("# releases: "+c.header+"\n\ncreate cm/a\n----\ncm/a live\n"))
		if err != nil {
			t.Fatal(err)
		}
		rr, err := tr.Releases()
		if err != nil {
			t.Fatal(err)
		}
		in, _ := model.ParseRelease(c.in)
		out, _ := model.ParseRelease(c.out)
		if !rr.Contains(in) || rr.Contains(out) {
			t.Errorf("%s (%s): contains %s %v, %s %v", c.header, rr, c.in, rr.Contains(in), c.out, rr.Contains(out))
		}
	}
	// a range that is not one is refused where it is written, by Parse
	if _, err := Parse("h.trace", strings.NewReader("# d\n# releases: 1.33 or so\n\ncreate cm/a\n----\ncm/a live\n")); err == nil || !strings.HasPrefix(err.Error(), "h.trace:2:1: ") {
		t.Errorf("got %v, want an error at h.trace:2:1", err)
	}
}

// TestSkewedReleaseHeaders: a trace found on a skewed control plane
// names kube-apiserver's minor in `releases` and kube-controller-manager's
// in `kcm-releases` (ReleaseHeaders); it replays on such a control plane
// when none is named, and is refused, naming both ranges, on a release
// that is not one.
func TestSkewedReleaseHeaders(t *testing.T) {
	skew := model.Release{Major: 1, Minor: 34, Patch: 4}.WithKCM(model.Release{Major: 1, Minor: 33, Patch: 13})
	var b strings.Builder
	for _, h := range ReleaseHeaders(skew) {
		b.WriteString("# " + h.Key + ": " + h.Value + "\n")
	}
	if want := "# releases: v1.34..v1.34\n# kcm-releases: v1.33..v1.33\n"; b.String() != want {
		t.Fatalf("ReleaseHeaders(%v):\n%swant\n%s", skew, b.String(), want)
	}
	if got := ReleaseFlags(skew); got != " --kube-version v1.34.4 --kcm-version v1.33.13" {
		t.Errorf("ReleaseFlags(%v) = %q", skew, got)
	}
	tr, err := Parse("skew.trace", strings.NewReader(b.String()+"\ncreate cm/a\n----\n"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := tr.ReleaseFor(model.Release{})
	if err != nil || r.APIServer().Minor != 34 || r.KCM().Minor != 33 {
		t.Errorf("ReleaseFor(none) = %v, %v: want v1.34 with kube-controller-manager v1.33", r, err)
	}
	if r, err := tr.ReleaseFor(skew); err != nil || r != skew {
		t.Errorf("ReleaseFor(%v) = %v, %v", skew, r, err)
	}
	var nf *NotForRelease
	if _, err := tr.ReleaseFor(model.Release{Major: 1, Minor: 34, Patch: 4}); !errors.As(err, &nf) || !strings.Contains(err.Error(), "kube-apiserver v1.34.0 to before v1.35.0 with kube-controller-manager v1.33.0 to before v1.34.0") {
		t.Errorf("ReleaseFor(v1.34.4): %v, want NotForRelease naming both ranges", err)
	}
	if len(ReleaseHeaders(model.Release{})) != 0 || ReleaseFlags(model.DefaultRelease) != "" {
		t.Error("the default release takes headers or flags")
	}
}
