package target

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// A kubeconfig that `cascade cluster` writes belongs to the user as soon as
// it is on disk: ~/.kube/config is the usual place people point tools at.
// The rules here are the ones kind and minikube follow, made strict:
//
//   - a new file is created exclusively (O_EXCL): an existing file is never
//     replaced by WriteKubeconfig;
//   - MergeKubeconfig adds cascade's clusters, users and contexts to an
//     existing file, each marked with an extension naming this run (as
//     minikube marks its entries with "cluster_info"), and refuses a name
//     the file already uses for an entry cascade did not write;
//   - Remove takes back exactly what the run added: when nobody changed the
//     file since, it puts back the original bytes (a created file is
//     removed); otherwise it deletes only the entries carrying this run's
//     mark and restores the current context it displaced.
//
// Every read-modify-write holds PATH.lock, created with O_EXCL, the lock
// kubectl's clientcmd.ModifyConfig takes, so that a concurrent
// `kubectl config use-context` is not lost. Writes go to a temporary file
// in the same directory, renamed over the original with its mode kept; a
// symlinked kubeconfig is followed, not replaced.

// ExtensionName is the key of the extension cascade puts on each cluster,
// user and context it writes into a kubeconfig.
const ExtensionName = "cascade"

// extension is the extension's content: who wrote the entry, and which run.
type extension struct {
	Provider string `json:"provider"`
	Run      string `json:"run"`
}

// KubeconfigFile is a kubeconfig that WriteKubeconfig created or
// MergeKubeconfig added to; Remove undoes that.
type KubeconfigFile struct {
	// Path is the file written: the kubeconfig path with symlinks resolved.
	Path string
	// Merged says whether the file existed before (MergeKubeconfig).
	Merged  bool
	run     string
	names   []string
	before  []byte // the file as it was before the merge (nil when created)
	written []byte // the file as cascade left it
	// made are the directories WriteKubeconfig created for the file,
	// deepest first: Remove removes those it leaves empty.
	made []string
}

// WriteKubeconfig creates a kubeconfig file (mode 0600) with one cluster,
// user and context per entry of contexts, each named after the context; the
// first is the current context. It refuses a path that exists. The
// configurations must carry their credentials inline (a client certificate
// and key, or a bearer token) and their CA as data, as envtest's do.
func WriteKubeconfig(path string, contexts ...Context) (*KubeconfigFile, error) {
	run := newRunID()
	kc := clientcmdapi.NewConfig()
	if err := addContexts(kc, run, contexts); err != nil {
		return nil, err
	}
	raw, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	made := missingDirs(filepath.Dir(path))
	if len(made) > 0 {
		if err := os.MkdirAll(made[0], 0o755); err != nil {
			return nil, fmt.Errorf("kubeconfig: %w", err)
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil, ExistsError(path)
	}
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	_, werr := f.Write(raw)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		_ = os.Remove(path) // created just now, by this call
		removeMade(made)
		return nil, fmt.Errorf("kubeconfig %s: %w", path, werr)
	}
	return &KubeconfigFile{Path: path, run: run, names: contextNames(contexts), written: raw, made: made}, nil
}

// missingDirs lists dir and those of its parents that do not exist,
// deepest first.
func missingDirs(dir string) []string {
	var out []string
	for {
		if _, err := os.Lstat(dir); err == nil || !errors.Is(err, fs.ErrNotExist) {
			return out
		}
		out = append(out, dir)
		parent := filepath.Dir(dir)
		if parent == dir {
			return out
		}
		dir = parent
	}
}

// ErrKubeconfigExists is wrapped by WriteKubeconfig's error for a path that
// exists.
var ErrKubeconfigExists = errors.New("kubeconfig exists")

// ExistsError is the error for a kubeconfig path that exists when a new
// file was asked for; it matches ErrKubeconfigExists.
func ExistsError(path string) error { return existsError(path) }

type existsError string

func (p existsError) Error() string {
	return string(p) + " already exists and cascade did not create it: pass --merge to add cascade's contexts to it (removed again on exit), or name a new file"
}

func (existsError) Is(target error) bool { return target == ErrKubeconfigExists }

// MergeKubeconfig adds contexts to the kubeconfig at path, as WriteKubeconfig
// would write them, and makes the first one current. The file must exist
// and parse. A cluster, user or context name the file already uses is
// refused unless that entry carries cascade's extension (a run that did
// not get to clean up, for example one killed with SIGKILL), in which case
// it is replaced.
func MergeKubeconfig(path string, contexts ...Context) (*KubeconfigFile, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	unlock, err := lockKubeconfig(real)
	if err != nil {
		return nil, err
	}
	defer unlock()
	before, kc, err := loadForMerge(real, path, contextNames(contexts))
	if err != nil {
		return nil, err
	}
	run := newRunID()
	if err := addContexts(kc, run, contexts); err != nil {
		return nil, err
	}
	raw, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	if err := replaceFile(real, raw); err != nil {
		return nil, err
	}
	return &KubeconfigFile{Path: real, Merged: true, run: run, names: contextNames(contexts), before: before, written: raw}, nil
}

// CheckMerge tells, without writing, whether MergeKubeconfig could add
// contexts with these names to the kubeconfig at path: it exists, parses
// and uses none of the names for an entry cascade did not write. `cascade
// cluster --merge` asks before it starts a control plane.
func CheckMerge(path string, names ...string) error {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	_, _, err = loadForMerge(real, path, names)
	return err
}

// loadForMerge reads the kubeconfig at real (path as the user named it, for
// messages) and refuses it when it does not parse or uses one of names for
// an entry cascade did not write.
func loadForMerge(real, path string, names []string) ([]byte, *clientcmdapi.Config, error) {
	raw, err := os.ReadFile(real)
	if err != nil {
		return nil, nil, fmt.Errorf("kubeconfig: %w", err)
	}
	kc, err := clientcmd.Load(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("kubeconfig %s does not parse, cascade will not touch it: %s", path, OneLine(err))
	}
	for _, n := range names {
		if owner, taken := foreignEntry(kc, n); taken {
			return nil, nil, fmt.Errorf("kubeconfig %s already has a %s named %q that cascade did not write: cascade will not replace it", path, owner, n)
		}
	}
	return raw, kc, nil
}

// Remove undoes WriteKubeconfig or MergeKubeconfig. A file nobody changed
// since goes back to what it was: removed if cascade created it, its
// original bytes otherwise. A file someone changed keeps those changes:
// only the entries this run wrote go, the current context goes back to the
// one the merge displaced (when it still exists), and a file cascade
// created is removed only when nothing else is left in it. A file already
// gone is fine. The directories WriteKubeconfig created for the file go
// too, each only when empty.
func (k *KubeconfigFile) Remove() error {
	err := k.remove()
	if err == nil {
		removeMade(k.made)
	}
	return err
}

// removeMade removes the directories WriteKubeconfig made, deepest first,
// each only when empty; one already gone is passed over.
func removeMade(made []string) {
	for _, d := range made {
		if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return // not empty: its parents are not either
		}
	}
}

func (k *KubeconfigFile) remove() error {
	if _, err := os.Stat(filepath.Dir(k.Path)); errors.Is(err, fs.ErrNotExist) {
		return nil // gone with its directory (a Remove before this one)
	}
	unlock, err := lockKubeconfig(k.Path)
	if err != nil {
		return err
	}
	defer unlock()
	now, err := os.ReadFile(k.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	if bytes.Equal(now, k.written) {
		if !k.Merged {
			return removeFile(k.Path)
		}
		return replaceFile(k.Path, k.before)
	}
	kc, err := clientcmd.Load(now)
	if err != nil {
		return fmt.Errorf("kubeconfig %s was changed since cascade wrote it and no longer parses: cascade's contexts %s are left in it", k.Path, strings.Join(k.names, ", "))
	}
	for _, n := range k.names {
		if ext, ok := kc.Clusters[n]; ok && k.ours(ext.Extensions) {
			delete(kc.Clusters, n)
		}
		if ext, ok := kc.AuthInfos[n]; ok && k.ours(ext.Extensions) {
			delete(kc.AuthInfos, n)
		}
		if ext, ok := kc.Contexts[n]; ok && k.ours(ext.Extensions) {
			delete(kc.Contexts, n)
		}
	}
	if _, ok := kc.Contexts[kc.CurrentContext]; !ok {
		kc.CurrentContext = ""
		if k.Merged {
			if prev, err := clientcmd.Load(k.before); err == nil {
				if _, ok := kc.Contexts[prev.CurrentContext]; ok {
					kc.CurrentContext = prev.CurrentContext
				}
			}
		}
	}
	if !k.Merged && len(kc.Clusters)+len(kc.AuthInfos)+len(kc.Contexts)+len(kc.Extensions) == 0 {
		return removeFile(k.Path)
	}
	raw, err := clientcmd.Write(*kc)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", k.Path, err)
	}
	return replaceFile(k.Path, raw)
}

// ours says whether an entry's extensions mark it as written by this run.
func (k *KubeconfigFile) ours(exts map[string]runtime.Object) bool {
	e, ok := readExtension(exts)
	return ok && e.Run == k.run
}

// addContexts puts one cluster, user and context per entry into kc, each
// marked with cascade's extension for run, and makes the first current.
func addContexts(kc *clientcmdapi.Config, run string, contexts []Context) error {
	if len(contexts) == 0 {
		return errors.New("kubeconfig: no context to write")
	}
	for _, c := range contexts {
		cfg := c.Config
		if len(cfg.CertData) == 0 && cfg.BearerToken == "" && cfg.Username == "" {
			return fmt.Errorf("kubeconfig: context %s: the configuration carries no inline credentials", c.Name)
		}
		cl := clientcmdapi.NewCluster()
		cl.Server = cfg.Host
		cl.CertificateAuthorityData = cfg.CAData
		cl.InsecureSkipTLSVerify = cfg.Insecure
		cl.Extensions[ExtensionName] = markFor(run)
		kc.Clusters[c.Name] = cl
		user := clientcmdapi.NewAuthInfo()
		user.ClientCertificateData, user.ClientKeyData = cfg.CertData, cfg.KeyData
		user.Token = cfg.BearerToken
		user.Username, user.Password = cfg.Username, cfg.Password
		user.Extensions[ExtensionName] = markFor(run)
		kc.AuthInfos[c.Name] = user
		ctx := clientcmdapi.NewContext()
		ctx.Cluster, ctx.AuthInfo = c.Name, c.Name
		ctx.Extensions[ExtensionName] = markFor(run)
		kc.Contexts[c.Name] = ctx
	}
	kc.CurrentContext = contexts[0].Name
	return nil
}

// foreignEntry reports whether kc has a cluster, user or context named
// name that cascade did not write, and which of the three.
func foreignEntry(kc *clientcmdapi.Config, name string) (string, bool) {
	if c, ok := kc.Clusters[name]; ok {
		if _, marked := readExtension(c.Extensions); !marked {
			return "cluster", true
		}
	}
	if u, ok := kc.AuthInfos[name]; ok {
		if _, marked := readExtension(u.Extensions); !marked {
			return "user", true
		}
	}
	if c, ok := kc.Contexts[name]; ok {
		if _, marked := readExtension(c.Extensions); !marked {
			return "context", true
		}
	}
	return "", false
}

func markFor(run string) runtime.Object {
	raw, _ := json.Marshal(extension{Provider: "cascade", Run: run})
	return &runtime.Unknown{Raw: raw, ContentType: runtime.ContentTypeJSON}
}

// readExtension decodes cascade's extension; a kubeconfig read from disk
// holds extensions as runtime.Unknown.
func readExtension(exts map[string]runtime.Object) (extension, bool) {
	u, ok := exts[ExtensionName].(*runtime.Unknown)
	if !ok {
		return extension{}, false
	}
	var e extension
	if err := json.Unmarshal(u.Raw, &e); err != nil || e.Provider != "cascade" || e.Run == "" {
		return extension{}, false
	}
	return e, true
}

func contextNames(contexts []Context) []string {
	var names []string
	for _, c := range contexts {
		names = append(names, c.Name)
	}
	sort.Strings(names)
	return names
}

func newRunID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// lockKubeconfig takes PATH.lock as clientcmd's lockFile does, waiting up
// to 5 seconds for another holder.
func lockKubeconfig(path string) (func(), error) {
	lock := path + ".lock"
	deadline := time.Now().Add(5 * time.Second)
	for {
		f, err := os.OpenFile(lock, os.O_CREATE|os.O_EXCL, 0)
		if err == nil {
			_ = f.Close()
			return func() { _ = os.Remove(lock) }, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("kubeconfig: lock: %w", err)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("kubeconfig %s is locked by another writer (%s exists; remove it if no kubectl or cascade is running)", path, lock)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// replaceFile writes raw to path through a temporary file in the same
// directory renamed over it, keeping path's mode (0600 when it is new).
func replaceFile(path string, raw []byte) error {
	mode := fs.FileMode(0o600)
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".cascade-*")
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	_, werr := tmp.Write(raw)
	if werr == nil {
		werr = tmp.Chmod(mode)
	}
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("kubeconfig %s: %w", path, werr)
	}
	return nil
}

func removeFile(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	return nil
}
