package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cascade-k8s/cascade/harness/controlplane"
	"github.com/cascade-k8s/cascade/harness/target"
	"github.com/cascade-k8s/cascade/model"
)

// kubeVersionUsage is --kube-version's help text.
const kubeVersionUsage = "the Kubernetes release the control plane runs, vX.Y.Z: it picks the model's release-dependent semantics and the known races of that release " +
	"(default: the release of the kube-apiserver in --kube-bin-dir where the command has it, $KUBEBUILDER_ASSETS or bin/kube/" + controlplane.KubeVersion + ", else " + controlplane.KubeVersion + "; here and now: " + releaseInUse + ")"

// releaseInUse stands, in help texts, for the release the command would
// use with no --kube-version: the release of the binaries in use, found
// when the help is printed (withReleaseInHelp).
const releaseInUse = "{kube-release}"

// withReleaseInHelp makes root's help replace releaseInUse in the long
// text and flag usages of the command asked about with the release in
// use, and where it came from.
func withReleaseInHelp(root *cobra.Command) {
	help := root.HelpFunc()
	root.SetHelpFunc(func(c *cobra.Command, args []string) {
		in := helpRelease(c)
		c.Long = strings.ReplaceAll(c.Long, releaseInUse, in)
		c.Flags().VisitAll(func(f *pflag.Flag) { f.Usage = strings.ReplaceAll(f.Usage, releaseInUse, in) })
		help(c, args)
	})
}

// helpRelease describes the release in use for c's help: of the
// binaries --kube-bin-dir (if already given), $KUBEBUILDER_ASSETS or the
// checkout's bin/kube name, else the default.
func helpRelease(c *cobra.Command) string {
	binDir := ""
	if f := c.Flags().Lookup("kube-bin-dir"); f != nil {
		binDir = f.Value.String()
	}
	dir, _, err := controlplane.ResolveBinDir(binDir)
	if err == nil {
		if v, verr := controlplane.BinaryVersion(dir); verr == nil {
			return v + ", the kube-apiserver in " + dir
		}
	}
	return model.DefaultRelease.String() + ", the default: no kube-apiserver found"
}

func registerKubeVersion(fl *pflag.FlagSet, p *string) {
	fl.StringVar(p, "kube-version", "", kubeVersionUsage)
}

// kcmVersionUsage is --kcm-version's help text.
const kcmVersionUsage = "kube-controller-manager's release when it is not kube-apiserver's, vX.Y.Z, as in a control plane mid-upgrade: the garbage collector's behaviour and its known races follow it, the API's answers --kube-version's " +
	"(default: on upstream and upstream-stepped the release of the kube-controller-manager binary they start, elsewhere --kube-version's; not for impl and impl-stepped, whose GC is cascade's)"

func registerKCMVersion(fl *pflag.FlagSet, p *string) {
	fl.StringVar(p, "kcm-version", "", kcmVersionUsage)
}

// withKCMVersion is rel with kube-controller-manager at the release
// --kcm-version names (model.Release.WithKCM), and whether it names one.
func withKCMVersion(rel model.Release, kcmVersion string) (model.Release, bool, error) {
	if kcmVersion == "" {
		return rel, false, nil
	}
	k, err := model.ParseRelease(kcmVersion)
	if err != nil {
		return rel, false, usageErr("--kcm-version: %v", err)
	}
	return rel.WithKCM(k), true, nil
}

// resolveRelease is the release a command judges and, for envtest
// targets, the directory of the binaries to start when --kube-version
// picks it ("" when the target finds it as always). An explicit
// --kube-version wins; with neither --kube-bin-dir nor
// $KUBEBUILDER_ASSETS it also picks bin/kube/<release> of the checkout.
// Without it the release is that of the kube-apiserver in the binary
// directory, or the default release when there is none (the model needs
// no binaries). A --kube-version the binaries contradict, or one that is
// not a release, is a usage error.
//
// With kcm (the targets whose GC is kube-controller-manager's, upstream
// and upstream-stepped), kube-controller-manager's release is the one
// --kcm-version names, else that of the kube-controller-manager binary
// beside that kube-apiserver, which makes the release skewed
// (model.Release.WithKCM) when it is another, as the target will find
// it; a --kcm-version that binary contradicts is a usage error. Without
// kcm a --kcm-version is applied as named (the target refuses it where
// no kube-controller-manager's GC runs).
func resolveRelease(kubeVersion, kcmVersion, binDirFlag string, kcm bool) (model.Release, string, error) {
	rel, binDir, dir, err := resolveAPIServerRelease(kubeVersion, binDirFlag)
	if err != nil {
		return rel, "", err
	}
	named, _, err := withKCMVersion(rel, kcmVersion)
	if err != nil || !kcm || dir == "" {
		return named, binDir, err
	}
	if _, serr := os.Stat(filepath.Join(dir, controlplane.ControllerManagerBinary)); serr != nil {
		return named, binDir, nil // the target names what is missing
	}
	have, err := target.BinaryRelease(dir, controlplane.ControllerManagerBinary)
	switch {
	case err != nil:
		return rel, "", usageErr("%v", err)
	case kcmVersion != "" && named.KCM() != have:
		return rel, "", usageErr("--kcm-version %s, but the kube-controller-manager in %s is %s: name its release, or leave the flag out", named.KCM(), dir, have)
	}
	return rel.WithKCM(have), binDir, nil
}

// resolveAPIServerRelease is resolveRelease for kube-apiserver alone,
// and the directory whose kube-apiserver it read ("" for none).
func resolveAPIServerRelease(kubeVersion, binDirFlag string) (rel model.Release, binDir, dir string, err error) {
	if rel, err = parseKubeVersion(kubeVersion); err != nil {
		return rel, "", "", err
	}
	var source string
	var derr error
	dir, source, derr = controlplane.ResolveBinDir(binDirFlag)
	if derr != nil {
		// no checkout around the working directory: the binaries come
		// from around the executable (target.resolveBinDir), or nowhere
		if exe, xerr := os.Executable(); xerr == nil {
			if root, xerr := controlplane.RepoRoot(filepath.Dir(exe)); xerr == nil {
				dir, source, derr = filepath.Join(root, "bin", "kube", controlplane.KubeVersion), "repository", nil
			}
		}
	}
	if derr == nil && source == "repository" && kubeVersion != "" {
		dir = filepath.Join(filepath.Dir(dir), rel.String())
	}
	if derr == nil && source == "repository" && kubeVersion != "" {
		binDir = dir // otherwise the target resolves the same directory itself
	}
	have := ""
	if derr == nil {
		if _, serr := os.Stat(filepath.Join(dir, controlplane.APIServerBinary)); serr == nil {
			if have, err = controlplane.BinaryVersion(dir); err != nil {
				return rel, "", "", usageErr("%v", err)
			}
		} else if !errors.Is(serr, os.ErrNotExist) {
			return rel, "", "", usageErr("%v", serr)
		}
	}
	switch {
	case kubeVersion != "" && have == "" && derr == nil && source == "repository":
		return rel, "", "", usageErr("--kube-version %s: no control plane is built for it in %s: build it with 'make kube KUBE_VERSION=%s'", rel, dir, rel)
	case kubeVersion == "" && have == "":
		return model.DefaultRelease, binDir, "", nil
	case kubeVersion == "":
		if rel, err = model.ParseRelease(have); err != nil {
			return rel, "", "", usageErr("%s: %v", filepath.Join(dir, controlplane.APIServerBinary), err)
		}
		return rel, binDir, dir, nil
	case have != "" && have != rel.String():
		return rel, "", "", usageErr("--kube-version %s, but the kube-apiserver in %s is %s (from %s): name its release, or point --kube-bin-dir at %s binaries",
			rel, dir, have, source, rel)
	}
	return rel, binDir, dir, nil
}

// parseKubeVersion is the release --kube-version names, the default one
// when it names none.
func parseKubeVersion(v string) (model.Release, error) {
	if v == "" {
		return model.DefaultRelease, nil
	}
	rel, err := model.ParseRelease(v)
	if err != nil {
		return rel, usageErr("--kube-version: %v", err)
	}
	return rel, nil
}

// releaseNote is the line commands print on stderr naming the release
// they judge.
func releaseNote(rel model.Release) string {
	rel = rel.Or()
	note := fmt.Sprintf("kubernetes release %s (model semantics and known races of that release)", rel)
	a, k := rel.APIServer(), rel.KCM()
	if rel.Skewed() {
		note = fmt.Sprintf("kubernetes release %s: the API's answers of %s, the garbage collector's behaviour and known races of %s", rel, a, k)
		// version skew policy: kube-controller-manager not newer than
		// kube-apiserver, and at most one minor older
		if a.Less(k) || k.Minor < a.Minor-1 {
			note += "; outside Kubernetes' version skew policy (kube-controller-manager at most one minor older than kube-apiserver, never newer), untested upstream"
		}
	}
	judged := []model.Release{a}
	if rel.Skewed() {
		judged = append(judged, k)
	}
	for _, r := range judged {
		switch {
		case r.Minor < model.OldestRelease.Minor:
			// a real cluster of an older release, say: the table's
			// changes all came later, but what else changed before v1.30
			// is unread
			note += fmt.Sprintf("; %s is older than v1.%d, the oldest release the model's release table was read against: judged with the semantics it gives releases before its first change, unchecked for that release", r, model.OldestRelease.Minor)
		case r.Minor > model.DefaultRelease.Minor:
			// a new release being added (hack/kube/README.md): judged
			// as the newest one read until model/release.go says
			// otherwise
			note += fmt.Sprintf("; %s is newer than v1.%d, the newest release the model's release table was read against: judged with that release's semantics and known races", r, model.DefaultRelease.Minor)
		}
	}
	return note
}

// kubeconfigRelease is the release the kubeconfig target judges: the one
// --kube-version names, else the cluster's own (its /version), so that a
// real cluster of another release is not judged with this checkout's
// semantics. A --kube-version the cluster contradicts is a usage error.
// A kubeconfig that cannot be loaded, or a cluster that cannot be
// asked, is the usage error the target's start would give (asked once,
// not twice: each try may take the 10-second timeout).
func kubeconfigRelease(kubeconfig, kubeContext, kubeVersion string) (model.Release, error) {
	named, err := parseKubeVersion(kubeVersion)
	if err != nil {
		return named, err
	}
	cfg, where, err := target.LoadKubeconfig(kubeconfig, kubeContext)
	if err != nil {
		return named, usageErr("%v", err)
	}
	have, err := target.ServerVersion(cfg)
	if err != nil {
		return named, usageErr("%v", target.Unreachable(cfg, where, err))
	}
	// a vendor's build (v1.30.4-eks-1a2b3c, v1.29.3+k3s1) is its release
	if i := strings.IndexAny(have, "-+"); i > 0 {
		have = have[:i]
	}
	rel, err := model.ParseRelease(have)
	switch {
	case err != nil:
		return named, usageErr("the cluster of %s reports version %q: %v; name its release with --kube-version", where, have, err)
	case kubeVersion == "":
		return rel, nil
	case rel != named:
		return named, usageErr("--kube-version %s, but the cluster of %s runs %s: name its release, or leave the flag out", named, where, rel)
	}
	return named, nil
}
