package lin

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cascade-k8s/cascade/harness/history"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of every testdata/answers file from the checker")

// TestAnswerFixtures runs the histories under testdata/answers, one file
// per kind of answer the model's predicates decide (model/answers.go,
// model/spec.go), each with histories in and out of the rule, in the
// style of cockroachdb/datadriven: a stanza is a history, one op a line,
// then `----` and the checker's verdict. `go test -run
// TestAnswerFixtures -rewrite` writes the verdicts back.
//
// Ops (each takes 10 ms, 2 s after the one before, beyond the race
// window, unless `at=CALL-RETURN` in ms places it; namespaced kinds live
// in namespace ns):
//
//	create ACTOR KIND/NAME [fins=F,...] [owner=KIND/NAME[:block]]
//	write ACTOR KIND/NAME [fins=F,...] [drop-owners]   a successful patch
//	delete ACTOR KIND/NAME [prop=POLICY]      a successful DELETE as the API server answers it
//	op VERB ACTOR KIND/NAME code=N [reason=R] [uid=live|other] [rv=live|stale]
//	   [prop=POLICY] [orphan=true|false]
//	   [answer=live|changed|gone] [fins=F,...] [deleting|cleared]
//
// `op` is a raw answer: code and answer say what the server returned
// (live: the live object unchanged; changed: the live object with the
// given finalizers at a new resourceVersion, deletionTimestamp set by
// deleting or cleared by cleared; gone: removed); VERB observed is a
// write seen only by watch,
// uid and rv the preconditions sent.
func TestAnswerFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/answers/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures under testdata/answers: %v", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			lines, stanzas := readFixture(t, path)
			var out []string
			prev := 0
			for _, st := range stanzas {
				got := runHistory(t, path, lines, st)
				if *rewrite {
					out = append(out, lines[prev:st.sep+1]...)
					out = append(out, got)
					prev = st.end
					continue
				}
				if want := strings.Join(lines[st.sep+1:st.end], "\n"); got != want {
					t.Errorf("%s:%d: the checker says\n  %s\nthe fixture expects\n  %s", path, st.from+1, got, want)
				}
			}
			if *rewrite {
				out = append(out, lines[prev:]...)
				if err := os.WriteFile(path, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// stanza is the line range of one history: ops from from to sep, the
// expected verdict from sep+1 to end (exclusive).
type stanza struct{ from, sep, end int }

func readFixture(t *testing.T, path string) ([]string, []stanza) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	var out []stanza
	for i := 0; i < len(lines); i++ {
		if lines[i] == "" || strings.HasPrefix(lines[i], "#") {
			continue
		}
		st := stanza{from: i, sep: -1}
		for ; i < len(lines) && lines[i] != ""; i++ {
			if lines[i] == "----" && st.sep < 0 {
				st.sep = i
			}
		}
		if st.sep < 0 {
			t.Fatalf("%s:%d: a history without a ---- line", path, st.from+1)
		}
		st.end = i
		out = append(out, st)
	}
	return lines, out
}

// runHistory builds the history of st and returns the checker's verdict
// on one line.
func runHistory(t *testing.T, path string, lines []string, st stanza) string {
	b := newBuilder(t)
	var clock int64
	for n := st.from; n < st.sep; n++ {
		line := lines[n]
		if strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 3 {
			t.Fatalf("%s:%d: want VERB ACTOR KIND/NAME ...: %q", path, n+1, line)
		}
		args := map[string]string{}
		for _, f := range fields[3:] {
			k, v, _ := strings.Cut(f, "=")
			args[k] = v
		}
		if fields[0] == "op" {
			fields = fields[1:]
		}
		short, name, _ := strings.Cut(fields[2], "/")
		k := key(short, name)
		call, ret := clock, clock+10
		if at, ok := args["at"]; ok {
			c, r, _ := strings.Cut(at, "-")
			call, ret = atoi(t, c), atoi(t, r)
		}
		clock = max(clock, ret) + 2000
		callNs, retNs := call*int64(ms), ret*int64(ms)
		switch {
		case line[:2] != "op" && fields[0] == "create":
			var refs []history.Ref
			if o, ok := args["owner"]; ok {
				spec, block := strings.CutSuffix(o, ":block")
				ok, on, _ := strings.Cut(spec, "/")
				refs = append(refs, b.ref(key(ok, on), block, false))
			}
			b.create(fields[1], k, callNs, retNs, finalizers(args), refs...)
		case line[:2] != "op" && fields[0] == "write":
			fins := finalizers(args)
			_, setFins := args["fins"]
			_, drop := args["drop-owners"]
			b.write(fields[1], k, callNs, retNs, func(o *history.Object) {
				if setFins {
					o.Finalizers = fins
				}
				if drop {
					o.Owners = nil
				}
			})
		case line[:2] != "op" && fields[0] == "delete":
			b.del(fields[1], k, callNs, retNs, args["prop"])
		case line[:2] == "op":
			rawOp(t, b, history.Verb(fields[0]), fields[1], k, callNs, retNs, args)
		default:
			t.Fatalf("%s:%d: unknown op %q", path, n+1, fields[0])
		}
	}
	r := b.check()
	switch {
	case r.Verdict == "Ok" && len(r.Known) == 0:
		return "Ok"
	case r.Verdict == "Ok":
		var ks []string
		for _, k := range r.Known {
			ks = append(ks, fmt.Sprintf("%s at op %d", k.Issue, k.Op))
		}
		return "Ok with known races: " + strings.Join(ks, ", ")
	}
	why := r.Summary
	if _, after, ok := strings.Cut(why, " that can: "); ok {
		why = strings.TrimSuffix(after, ".")
	}
	return fmt.Sprintf("%s at op %d: %s", r.Verdict, r.Culprit, why)
}

func atoi(t *testing.T, s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func finalizers(args map[string]string) []string {
	if f := args["fins"]; f != "" {
		return strings.Split(f, ",")
	}
	return nil
}

// rawOp appends an op with the answer args give (see TestAnswerFixtures).
func rawOp(t *testing.T, b *builder, verb history.Verb, actor string, k history.Key, call, ret int64, args map[string]string) {
	live := b.live[k]
	op := history.Op{Actor: actor, Verb: verb, Kind: k.Kind, Namespace: k.Namespace, Name: k.Name, Call: call, Return: ret}
	op.Code, op.Reason = int(atoi(t, args["code"])), args["reason"]
	var uid string
	switch args["uid"] {
	case "live":
		uid = live.UID
	case "other":
		uid = "u-other"
	}
	var rv uint64
	switch args["rv"] {
	case "live":
		rv = live.RV
	case "stale":
		rv = live.RV - 1
	}
	if verb == history.Delete {
		op.Delete = &history.DeleteOptions{Propagation: args["prop"], PreconditionUID: uid}
		if rv != 0 {
			op.Delete.PreconditionRV = strconv.FormatUint(rv, 10)
		}
		if o, ok := args["orphan"]; ok {
			v := o == "true"
			op.Delete.Orphan = &v
		}
	} else {
		op.Sent = &history.Object{UID: uid, RV: rv}
	}
	switch args["answer"] {
	case "live":
		got := *live
		op.Got = &got
	case "changed":
		got := *live
		got.Finalizers = finalizers(args)
		_, deleting := args["deleting"]
		_, cleared := args["cleared"]
		got.Deleting = (deleting || live.Deleting) && !cleared
		got.RV = b.nextRV()
		op.Got = &got
		b.live[k] = &got
	case "gone":
		got := *live
		got.Finalizers = finalizers(args)
		if _, ok := args["deleting"]; ok {
			got.Deleting = true
		}
		op.Got, op.Removed = &got, true
		delete(b.live, k)
	}
	b.add(op)
}
