package render

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
)

// chromium runs headless Chromium on a page with extra flags and returns
// its standard output. The test skips when Chromium is not installed.
func chromium(t *testing.T, page string, flags ...string) []byte {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed (Debian: apt-get install -y chromium); the rendered page is not checked in a browser")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
		"--user-data-dir=" + t.TempDir(), "--window-size=1600,1000"}, flags...)
	cmd := exec.CommandContext(ctx, bin, append(args, "file://"+page)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	return out
}

// renderedDOM writes the page for a trace, loads it in Chromium at the
// given URL fragment and returns the document after its script ran.
func renderedDOM(t *testing.T, trace, fragment string) (*html.Node, string) {
	t.Helper()
	tr, fs := frames(t, trace)
	page := filepath.Join(t.TempDir(), "race.html")
	var buf bytes.Buffer
	if err := HTML(&buf, tr, fs); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(bytes.NewReader(chromium(t, page+fragment, "--dump-dom")))
	if err != nil {
		t.Fatal(err)
	}
	if ready := find(doc, func(n *html.Node) bool { return n.Data == "body" && attr(n, "data-ready") == "1" }); len(ready) != 1 {
		t.Fatal("the page's script did not run to the end (no body[data-ready=1])")
	}
	return doc, page
}

// TestBrowserOpensOnTheRace loads the orphan-adoption page in headless
// Chromium and checks what a person sees: the page opens on the violating
// step (its frame the only one shown, with the graph before and after);
// one swimlane per actor; exactly two steps marked and highlighted as the
// racing pair, the adoption in the Deployment controller's lane and the
// DELETE in the attemptToDelete worker's; the arrow between them drawn;
// and both marks visible in a screenshot.
func TestBrowserOpensOnTheRace(t *testing.T) {
	doc, page := renderedDOM(t, "../races/orphan-adoption.trace", "")

	shown := find(doc, func(n *html.Node) bool { return hasClass(n, "frame") && !hasAttr(n, "hidden") })
	if len(shown) != 1 || attr(shown[0], "id") != "f18" {
		t.Fatalf("frames shown: %v, want only f18 (gc delete rs/web-1)", ids(shown))
	}
	for _, fig := range []string{"before", "after"} {
		if len(find(shown[0], func(n *html.Node) bool { return n.Data == "figure" && hasClass(n, fig) })) != 1 {
			t.Errorf("the violating step's frame has no %q graph", fig)
		}
	}
	if cur := find(doc, func(n *html.Node) bool { return n.Data == "tr" && hasClass(n, "cur") }); len(cur) != 1 || attr(cur[0], "data-i") != "18" {
		t.Errorf("current swimlane rows: %d, want one, step 18", len(cur))
	}
	if pos := text(byID(doc, "pos")); pos != "step 18 / 23" {
		t.Errorf("position reads %q", pos)
	}

	var lanes []string
	for _, th := range find(doc, func(n *html.Node) bool { return n.Data == "th" && hasClass(n, "lane") }) {
		lanes = append(lanes, attr(th, "data-lane"))
	}
	wantLanes := []string{"client", "controller informers", "Deployment controller", "GC informers (graph builder)", "GC worker: attemptToOrphan", "GC worker: attemptToDelete"}
	if !slices.Equal(lanes, wantLanes) {
		t.Errorf("lanes %q, want %q", lanes, wantLanes)
	}

	racing := find(doc, func(n *html.Node) bool { return n.Data == "td" && hasClass(n, "racing") })
	if len(racing) != 2 {
		t.Fatalf("%d cells highlighted as racing, want 2", len(racing))
	}
	for i, want := range []struct{ step, mark, lane, tag, cmd string }{
		{"11", "mark-enabling", "Deployment controller", "⚡ made it possible", "adopt rs/web-1 by=deploy/web"},
		{"18", "mark-violating", "GC worker: attemptToDelete", "✖ violating", "delete rs/web-1"},
	} {
		td := racing[i]
		tr := td.Parent
		if attr(tr, "data-i") != want.step || !hasClass(tr, want.mark) {
			t.Errorf("racing cell %d is in row %s (class %q), want step %s marked %s", i, attr(tr, "data-i"), attr(tr, "class"), want.step, want.mark)
		}
		if col := column(td); col < 1 || col > len(lanes) || lanes[col-1] != want.lane {
			t.Errorf("step %s sits in column %d, want lane %q", want.step, col, want.lane)
		}
		if got := text(td); !strings.HasPrefix(got, want.cmd) || !strings.Contains(got, want.tag) {
			t.Errorf("step %s cell reads %q, want %q marked %q", want.step, got, want.cmd, want.tag)
		}
	}
	if marked := find(doc, func(n *html.Node) bool {
		return n.Data == "tr" && (hasClass(n, "mark-enabling") || hasClass(n, "mark-violating"))
	}); len(marked) != 2 {
		t.Errorf("%d swimlane rows marked, want 2", len(marked))
	}
	path := byID(doc, "race-path")
	if path == nil || !strings.HasPrefix(attr(path, "d"), "M") || strings.Contains(attr(path, "d"), "NaN") {
		t.Errorf("the arrow from step 11 to step 18 is not drawn: %v", path)
	}

	// The screenshot: both marked cells are on screen in their colours.
	shot := filepath.Join(t.TempDir(), "race.png")
	chromium(t, page, "--screenshot="+shot)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	count := map[[3]uint32]int{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			count[[3]uint32{r >> 8, g >> 8, bl >> 8}]++
		}
	}
	for name, c := range map[string][3]uint32{"violating cell #ffcdd2": {0xff, 0xcd, 0xd2}, "enabling cell #ffe0b2": {0xff, 0xe0, 0xb2}} {
		if count[c] < 1000 {
			t.Errorf("screenshot %dx%d shows %d pixels of the %s", b.Dx(), b.Dy(), count[c], name)
		}
	}
}

// TestBrowserOpensOnTheFragment: a #N in the address opens step N, so a
// link can point at any step.
func TestBrowserOpensOnTheFragment(t *testing.T) {
	doc, _ := renderedDOM(t, "../races/orphan-adoption.trace", "#11")
	shown := find(doc, func(n *html.Node) bool { return hasClass(n, "frame") && !hasAttr(n, "hidden") })
	if len(shown) != 1 || attr(shown[0], "id") != "f11" {
		t.Fatalf("frames shown: %v, want only f11", ids(shown))
	}
}

func find(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	for d := range n.Descendants() {
		if d.Type == html.ElementNode && match(d) {
			out = append(out, d)
		}
	}
	return out
}

func byID(n *html.Node, id string) *html.Node {
	if m := find(n, func(d *html.Node) bool { return attr(d, "id") == id }); len(m) == 1 {
		return m[0]
	}
	return nil
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func hasAttr(n *html.Node, key string) bool {
	return slices.ContainsFunc(n.Attr, func(a html.Attribute) bool { return a.Key == key })
}

func hasClass(n *html.Node, class string) bool {
	return slices.Contains(strings.Fields(attr(n, "class")), class)
}

func ids(ns []*html.Node) []string {
	var out []string
	for _, n := range ns {
		out = append(out, attr(n, "id"))
	}
	return out
}

// text is a node's text content, spaces collapsed.
func text(n *html.Node) string {
	if n == nil {
		return ""
	}
	var b strings.Builder
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data + " ")
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// column is a table cell's 0-based position in its row.
func column(td *html.Node) int {
	i := 0
	for c := td.Parent.FirstChild; c != nil && c != td; c = c.NextSibling {
		if c.Type == html.ElementNode {
			i++
		}
	}
	return i
}
