package target

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
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
	c := rest.CopyConfig(cfg)
	c.Timeout = 10 * time.Second
	dc, err := discovery.NewDiscoveryClientForConfig(c)
	if err != nil {
		return errors.New(OneLine(err))
	}
	if _, err := dc.ServerVersion(); err != nil {
		return errors.New(OneLine(err))
	}
	return nil
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
// WriteKubeconfig writes.
type Context struct {
	Name   string
	Config *rest.Config
}

// WriteKubeconfig writes a kubeconfig file (mode 0600) with one cluster,
// user and context per entry of contexts, each named after the context;
// the first is the current context. The configurations must carry their
// credentials inline (a client certificate and key, or a bearer token) and
// their CA as data, as envtest's do.
func WriteKubeconfig(path string, contexts ...Context) error {
	if len(contexts) == 0 {
		return errors.New("kubeconfig: no context to write")
	}
	kc := clientcmdapi.NewConfig()
	for _, c := range contexts {
		cfg := c.Config
		if len(cfg.CertData) == 0 && cfg.BearerToken == "" && cfg.Username == "" {
			return fmt.Errorf("kubeconfig: context %s: the configuration carries no inline credentials", c.Name)
		}
		cl := clientcmdapi.NewCluster()
		cl.Server = cfg.Host
		cl.CertificateAuthorityData = cfg.CAData
		cl.InsecureSkipTLSVerify = cfg.Insecure
		kc.Clusters[c.Name] = cl
		user := clientcmdapi.NewAuthInfo()
		user.ClientCertificateData, user.ClientKeyData = cfg.CertData, cfg.KeyData
		user.Token = cfg.BearerToken
		user.Username, user.Password = cfg.Username, cfg.Password
		kc.AuthInfos[c.Name] = user
		ctx := clientcmdapi.NewContext()
		ctx.Cluster, ctx.AuthInfo = c.Name, c.Name
		kc.Contexts[c.Name] = ctx
	}
	kc.CurrentContext = contexts[0].Name
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("kubeconfig: %w", err)
		}
	}
	raw, err := clientcmd.Write(*kc)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	// an existing file keeps its mode on WriteFile: these are credentials
	return os.Chmod(path, 0o600)
}
