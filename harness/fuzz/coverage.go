package fuzz

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"

	"pgregory.net/rapid"

	"github.com/cascade-k8s/cascade/model"
)

// Coverage counts what a campaign's steps exercised of the trace
// language: client verbs by kind, the options of requests and owner
// references, deletion policies, and (stepped runs) the GC's, the
// controllers' and apiextensions' internal steps. `cascade fuzz
// --coverage` prints it; TestGeneratorCoverage asserts that default
// generation reaches every row.
type Coverage struct {
	mu sync.Mutex
	// Runs are the runs recorded; Steps their steps.
	Runs, Steps int
	verbKind    map[[2]string]int
	option      map[string]int
	policy      map[string]int
	internal    map[string]int
}

// NewCoverage returns an empty coverage count.
func NewCoverage() *Coverage {
	return &Coverage{verbKind: map[[2]string]int{}, option: map[string]int{}, policy: map[string]int{}, internal: map[string]int{}}
}

// CoverageClientVerbs are the client verbs of the trace language, the
// rows of the verb × kind table.
var CoverageClientVerbs = []string{"create", "delete", "add-finalizer", "remove-finalizer", "add-owner", "remove-owner", "label", "unlabel", "scale"}

// CoverageOptions are the request and owner-reference options of the
// trace language, in the table's order.
var CoverageOptions = []string{
	"create labels=", "create protection=Always", "create protection=Cascading", "create selector=", "create replicas>0", "create finalizers=",
	"owner same namespace", "owner other namespace", "owner cluster-scoped", "owner unserved kind", "owner self",
	"owner ,controller", "owner ,controller=unset", "owner ,block", "owner ,block=unset", "owner ,uid=SYMBOL",
	"delete if-uid=", "delete if-rv=", "delete dry-run", "update if-rv=", "as=limited",
}

// CoveragePolicies are the ways a delete chooses its propagation.
var CoveragePolicies = []string{"default", "propagation=Background", "propagation=Foreground", "propagation=Orphan", "orphan=true", "orphan=false"}

// CoverageInternal are the internal steps of the trace language, as a
// stepped run takes them.
var CoverageInternal = []string{
	"gc deliver", "gc deliver-virtual", "gc coalesce", "gc lose", "gc attemptToDelete", "gc attemptToOrphan",
	"gc delete", "gc patch", "gc unblock", "gc sync",
	"controller deliver", "controller coalesce", "controller adopt", "controller release", "apiextensions cleanup",
}

// record counts one run's steps, as trace lines; settle and lines that
// do not parse are skipped.
func (c *Coverage) record(lines []string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.Runs++
	for _, l := range lines {
		st, err := model.ParseStep(l)
		if err != nil {
			continue
		}
		c.Steps++
		c.step(st, l)
	}
}

func (c *Coverage) step(st model.Step, line string) {
	if st.Actor != model.ActorClient {
		verb, _, _ := strings.Cut(line, " ")
		rest, _, _ := strings.Cut(strings.TrimPrefix(line, verb+" "), " ")
		c.internal[verb+" "+rest]++
		return
	}
	verb, _, _ := strings.Cut(line, " ")
	c.verbKind[[2]string{verb, st.Target.Kind.Info().Short}]++
	if st.Principal == model.PrincipalLimited {
		c.option["as=limited"]++
	}
	if st.IfRV != 0 {
		c.option["update if-rv="]++
	}
	owners := st.Owners
	if st.Op == model.OpAddOwner {
		owners = []model.OwnerSpec{st.Owner}
	}
	for _, o := range owners {
		c.owner(st.Target, o)
	}
	switch st.Op {
	case model.OpCreate:
		if len(st.Labels) > 0 {
			c.option["create labels="]++
		}
		for _, l := range st.Labels {
			if l.Key == model.ProtectionLabel {
				c.option["create protection="+l.Value]++
			}
		}
		if st.Selector.Key != "" {
			c.option["create selector="]++
		}
		if st.Replicas > 0 {
			c.option["create replicas>0"]++
		}
		if len(st.Finalizers) > 0 {
			c.option["create finalizers="]++
		}
	case model.OpDelete:
		d := st.Delete
		if st.IfUIDSym != "" {
			c.option["delete if-uid="]++
		}
		if d.PreconditionRV != 0 {
			c.option["delete if-rv="]++
		}
		if d.DryRun {
			c.option["delete dry-run"]++
		}
		switch {
		case d.Policy != model.NoPolicy:
			c.policy["propagation="+d.Policy.String()]++
		case d.OrphanDependents != nil:
			c.policy[fmt.Sprintf("orphan=%t", *d.OrphanDependents)]++
		default:
			c.policy["default"]++
		}
	}
}

// owner counts an owner reference of a step on dep.
func (c *Coverage) owner(dep model.Target, o model.OwnerSpec) {
	k, served := model.KindByName(o.Kind)
	switch {
	case !served:
		c.option["owner unserved kind"]++
	case !k.Info().Namespaced:
		c.option["owner cluster-scoped"]++
	case k == dep.Kind && o.Name == dep.Name && o.Namespace == dep.Namespace:
		c.option["owner self"]++
	case o.Namespace == dep.Namespace:
		c.option["owner same namespace"]++
	default:
		c.option["owner other namespace"]++
	}
	for _, f := range []struct {
		on   bool
		name string
	}{{o.Controller, ",controller"}, {o.ControllerUnset, ",controller=unset"}, {o.Block, ",block"}, {o.BlockUnset, ",block=unset"}, {o.UIDSym != "", ",uid=SYMBOL"}} {
		if f.on {
			c.option["owner "+f.name]++
		}
	}
}

// Missed lists the rows of the trace language no recorded step reached:
// every client verb, every kind created and deleted, every option and
// policy, and with internal the internal steps.
func (c *Coverage) Missed(internal bool) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, v := range CoverageClientVerbs {
		n := 0
		for k, x := range c.verbKind {
			if k[0] == v {
				n += x
			}
		}
		if n == 0 {
			out = append(out, v)
		}
	}
	for _, k := range model.Kinds {
		for _, v := range []string{"create", "delete"} {
			if c.verbKind[[2]string{v, k.Short}] == 0 {
				out = append(out, v+" "+k.Short)
			}
		}
	}
	for _, o := range CoverageOptions {
		if c.option[o] == 0 {
			out = append(out, o)
		}
	}
	for _, p := range CoveragePolicies {
		if c.policy[p] == 0 {
			out = append(out, "delete "+p)
		}
	}
	if internal {
		for _, i := range CoverageInternal {
			if c.internal[i] == 0 {
				out = append(out, i)
			}
		}
	}
	return out
}

// Write prints the coverage table: client verbs × kinds, then options,
// policies and internal steps with their counts, then what was missed.
func (c *Coverage) Write(w io.Writer) error {
	c.mu.Lock()
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "coverage: %d runs, %d steps\n", c.Runs, c.Steps)
	fmt.Fprintf(tw, "%-17s\t", "verb \\ kind")
	for _, k := range model.Kinds {
		fmt.Fprintf(tw, "%s\t", k.Short)
	}
	fmt.Fprintln(tw)
	for _, v := range CoverageClientVerbs {
		fmt.Fprintf(tw, "%-17s\t", v)
		for _, k := range model.Kinds {
			fmt.Fprintf(tw, "%d\t", c.verbKind[[2]string{v, k.Short}])
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		c.mu.Unlock()
		return err
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	internal := len(c.internal) > 0 // concurrent runs take none
	type section struct {
		title string
		rows  []string
		count map[string]int
	}
	sections := []section{{"option", CoverageOptions, c.option}, {"delete policy", CoveragePolicies, c.policy}}
	if internal {
		sections = append(sections, section{"internal step", CoverageInternal, c.internal})
	}
	for _, sec := range sections {
		fmt.Fprintf(tw, "%s\tsteps\n", sec.title)
		for _, r := range sec.rows {
			fmt.Fprintf(tw, "  %s\t%d\n", r, sec.count[r])
		}
	}
	if err := tw.Flush(); err != nil {
		c.mu.Unlock()
		return err
	}
	c.mu.Unlock()
	missed := c.Missed(internal)
	if len(missed) == 0 {
		_, err := fmt.Fprintln(w, "not reached: nothing")
		return err
	}
	slices.Sort(missed)
	_, err := fmt.Fprintf(w, "not reached (%d): %s\n", len(missed), strings.Join(missed, "; "))
	return err
}

// DrawConcurrent draws the programs of cfg.Checks concurrent runs, as
// RunConcurrent with the same cfg and env's Relist and Lag would when
// every run passes, without a cluster, and counts them in cfg.Coverage.
func DrawConcurrent(env ConcurrentEnv, cfg Config) error {
	rapidMu.Lock()
	defer rapidMu.Unlock()
	if cfg.Clients <= 0 {
		cfg.Clients = 1
	}
	prop := func(t *rapid.T) {
		r := &concurrentRun{env: env, cfg: cfg, program: make([][]string, cfg.Clients)}
		r.draw(t)
		cfg.Coverage.record(slices.Concat(r.program...))
	}
	out, err := runRapid("cascade-fuzz-draw", cfg, prop)
	if err == nil && out.failed {
		err = fmt.Errorf("fuzz: drawing: %s", out.message())
	}
	return err
}
