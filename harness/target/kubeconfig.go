package target

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// LoadKubeconfig reads a kubeconfig the way kubectl does (path "" means
// $KUBECONFIG, else ~/.kube/config; context "" means the current context)
// and returns the client configuration with a description of where it came
// from, `context "C" in kubeconfig F`, for error messages. Errors are one
// line and name the kubeconfig and context.
func LoadKubeconfig(path, context string) (*rest.Config, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
	}
	file := path
	if file == "" {
		if env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar); env != "" {
			file = env
		} else {
			file = rules.GetDefaultFilename()
		}
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context})
	name := context
	if name == "" {
		raw, err := cc.RawConfig()
		if err != nil {
			return nil, "", fmt.Errorf("kubeconfig %s: %s", file, OneLine(err))
		}
		name = raw.CurrentContext
	}
	where := fmt.Sprintf("context %q in kubeconfig %s", name, file)
	if name == "" {
		if _, err := os.Stat(file); err != nil && !strings.ContainsRune(file, os.PathListSeparator) {
			return nil, "", fmt.Errorf("kubeconfig %s: %s", file, OneLine(err))
		}
		where = fmt.Sprintf("kubeconfig %s (it sets no current context: pass --context)", file)
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("%s: %s", where, OneLine(err))
	}
	return cfg, where, nil
}

// Reachable asks the API server cfg points at for its version, within 10
// seconds; the error is one line.
func Reachable(cfg *rest.Config) error {
	_, err := ServerVersion(cfg)
	return err
}

// ServerVersion is the gitVersion the API server cfg points at reports
// (v1.37.2, or a vendor's v1.30.4-eks-1a2b3c), asked within 10 seconds.
func ServerVersion(cfg *rest.Config) (string, error) {
	c := rest.CopyConfig(cfg)
	c.Timeout = 10 * time.Second
	dc, err := discovery.NewDiscoveryClientForConfig(c)
	if err != nil {
		return "", errors.New(OneLine(err))
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return "", errors.New(OneLine(err))
	}
	return v.GitVersion, nil
}

// Unreachable is the one-line error for a cluster that cannot be asked
// for its version (err, from ServerVersion or Reachable), naming where
// its kubeconfig and context came from.
func Unreachable(cfg *rest.Config, where string, err error) error {
	return fmt.Errorf("cannot reach the cluster of %s at %s: %s", where, cfg.Host, OneLine(err))
}

// OneLine is an error's message up to its first line break (client-go
// and envtest aggregate errors over several lines).
func OneLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}

// Context is one named client configuration of a kubeconfig that
// WriteKubeconfig or MergeKubeconfig writes.
type Context struct {
	Name   string
	Config *rest.Config
}
