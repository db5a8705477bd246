package target

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// usersKubeconfig is a kubeconfig as a person keeps it, comments and all:
// whatever cascade does, these bytes must come back.
const usersKubeconfig = `# my clusters, do not lose
apiVersion: v1
kind: Config
clusters:
- cluster:
    server: https://prod.example:6443
  name: prod
contexts:
- context:
    cluster: prod
    user: me
    namespace: payments
  name: mine
current-context: mine
users:
- name: me
  user:
    token: secret-token
`

func cascadeContexts() []Context {
	admin := &rest.Config{Host: "https://127.0.0.1:6443", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca"), CertData: []byte("cert"), KeyData: []byte("key")}}
	limited := &rest.Config{Host: "https://127.0.0.1:6443", BearerToken: "token", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca")}}
	return []Context{{Name: "cascade", Config: admin}, {Name: "cascade-limited", Config: limited}}
}

func writeUsers(t *testing.T, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(usersKubeconfig), mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func load(t *testing.T, path string) *clientcmdapi.Config {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

func sameBytes(t *testing.T, path, want string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the user's kubeconfig: %v", err)
	}
	if !bytes.Equal(got, []byte(want)) {
		t.Fatalf("the user's kubeconfig changed:\n%s", got)
	}
}

// TestWriteKubeconfigRefusesAnExistingFile: a new kubeconfig is never
// written over a file that exists, and the file keeps its bytes.
func TestWriteKubeconfigRefusesAnExistingFile(t *testing.T) {
	path := writeUsers(t, 0o600)
	_, err := WriteKubeconfig(path, cascadeContexts()...)
	if !errors.Is(err, ErrKubeconfigExists) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "--merge") {
		t.Fatalf("WriteKubeconfig over an existing file: %v", err)
	}
	sameBytes(t, path, usersKubeconfig)
}

// TestCreatedKubeconfigIsRemoved: a file cascade created goes on Remove,
// with the directories it created for it (out/cluster/ of `cascade
// cluster`) but not one that existed, and a second Remove (the file
// already gone) is no error.
func TestCreatedKubeconfigIsRemoved(t *testing.T) {
	tmp := t.TempDir()
	path := filepath.Join(tmp, "out", "cluster", "kc")
	k, err := WriteKubeconfig(path, cascadeContexts()...)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the created kubeconfig outlived Remove: %v", err)
	}
	if _, err := os.Stat(filepath.Join(tmp, "out")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the directories made for the kubeconfig outlived Remove: %v", err)
	}
	if _, err := os.Stat(tmp); err != nil {
		t.Fatalf("a directory that existed went: %v", err)
	}
	if err := k.Remove(); err != nil {
		t.Fatalf("Remove of a file already gone: %v", err)
	}
}

// TestMadeDirectoryWithOtherFilesIsKept: a directory cascade made for its
// kubeconfig stays when something else was put in it.
func TestMadeDirectoryWithOtherFilesIsKept(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "made")
	k, err := WriteKubeconfig(filepath.Join(dir, "kc"), cascadeContexts()...)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := k.Remove(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "notes")); err != nil || string(b) != "mine" {
		t.Fatalf("the user's file in the made directory: %q, %v", b, err)
	}
}

// TestMergeThenRemoveRestoresTheBytes: merged, the user's kubeconfig has
// the user's and cascade's contexts, cascade's current, its mode kept;
// after Remove it is byte for byte what it was, comments included.
func TestMergeThenRemoveRestoresTheBytes(t *testing.T) {
	path := writeUsers(t, 0o640)
	k, err := MergeKubeconfig(path, cascadeContexts()...)
	if err != nil {
		t.Fatal(err)
	}
	kc := load(t, path)
	if kc.CurrentContext != "cascade" || kc.Contexts["mine"] == nil || kc.Contexts["mine"].Namespace != "payments" ||
		kc.AuthInfos["me"] == nil || kc.AuthInfos["me"].Token != "secret-token" || kc.Contexts["cascade-limited"] == nil {
		t.Fatalf("merged kubeconfig: current %q, contexts %v", kc.CurrentContext, kc.Contexts)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o640 {
		t.Fatalf("the merge changed the file's mode to %v", st.Mode().Perm())
	}
	cfg, _, err := LoadKubeconfig(path, "cascade-limited")
	if err != nil || cfg.BearerToken != "token" {
		t.Fatalf("cascade's limited context in the merged file: %+v %v", cfg, err)
	}
	if err := k.Remove(); err != nil {
		t.Fatal(err)
	}
	sameBytes(t, path, usersKubeconfig)
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o640 {
		t.Fatalf("Remove changed the file's mode to %v", st.Mode().Perm())
	}
}

// TestRemoveKeepsTheUsersLaterChanges: a file changed after the merge
// (a context added, the current context switched, as kubectl config does)
// loses only the entries cascade wrote; the user's change stays, and a
// current context that was cascade's goes back to the user's.
func TestRemoveKeepsTheUsersLaterChanges(t *testing.T) {
	for _, switchTo := range []string{"other", "cascade"} {
		t.Run("current "+switchTo, func(t *testing.T) {
			path := writeUsers(t, 0o600)
			k, err := MergeKubeconfig(path, cascadeContexts()...)
			if err != nil {
				t.Fatal(err)
			}
			kc := load(t, path)
			kc.Contexts["other"] = &clientcmdapi.Context{Cluster: "prod", AuthInfo: "me"}
			kc.CurrentContext = switchTo
			if err := clientcmd.WriteToFile(*kc, path); err != nil {
				t.Fatal(err)
			}
			if err := k.Remove(); err != nil {
				t.Fatal(err)
			}
			kc = load(t, path)
			want := map[string]bool{"mine": true, "other": true}
			for n := range kc.Contexts {
				if !want[n] {
					t.Errorf("context %q left behind", n)
				}
				delete(want, n)
			}
			for n := range want {
				t.Errorf("the user's context %q is gone", n)
			}
			if kc.Clusters["cascade"] != nil || kc.AuthInfos["cascade-limited"] != nil || kc.Clusters["prod"] == nil || kc.AuthInfos["me"] == nil {
				t.Errorf("clusters %v users %v", kc.Clusters, kc.AuthInfos)
			}
			wantCurrent := map[string]string{"other": "other", "cascade": "mine"}[switchTo]
			if kc.CurrentContext != wantCurrent {
				t.Errorf("current context %q, want %q", kc.CurrentContext, wantCurrent)
			}
		})
	}
}

// TestCreatedFileTheUserAddedToIsKept: a kubeconfig cascade created but a
// user then added a context to is not removed; only cascade's entries go.
func TestCreatedFileTheUserAddedToIsKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kc")
	k, err := WriteKubeconfig(path, cascadeContexts()...)
	if err != nil {
		t.Fatal(err)
	}
	kc := load(t, path)
	kc.Clusters["prod"] = &clientcmdapi.Cluster{Server: "https://prod.example"}
	kc.Contexts["mine"] = &clientcmdapi.Context{Cluster: "prod"}
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	if err := k.Remove(); err != nil {
		t.Fatal(err)
	}
	kc = load(t, path)
	if len(kc.Contexts) != 1 || kc.Contexts["mine"] == nil || len(kc.Clusters) != 1 || len(kc.AuthInfos) != 0 || kc.CurrentContext != "" {
		t.Fatalf("after Remove: contexts %v clusters %v users %v current %q", kc.Contexts, kc.Clusters, kc.AuthInfos, kc.CurrentContext)
	}
}

// TestMergeRefusesAForeignName: a name the file uses for an entry cascade
// did not write is refused, before and at the merge, and the file keeps
// its bytes; an entry a dead cascade run left (it carries cascade's
// extension) is replaced.
func TestMergeRefusesAForeignName(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	clash := strings.Replace(usersKubeconfig, "name: mine", "name: cascade", 1)
	clash = strings.Replace(clash, "current-context: mine", "current-context: cascade", 1)
	if err := os.WriteFile(path, []byte(clash), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CheckMerge(path, "cascade", "cascade-limited"); err == nil || !strings.Contains(err.Error(), `context named "cascade"`) {
		t.Errorf("CheckMerge: %v", err)
	}
	if _, err := MergeKubeconfig(path, cascadeContexts()...); err == nil || !strings.Contains(err.Error(), `context named "cascade"`) {
		t.Errorf("MergeKubeconfig: %v", err)
	}
	sameBytes(t, path, clash)

	stale := filepath.Join(t.TempDir(), "stale")
	if _, err := WriteKubeconfig(stale, cascadeContexts()...); err != nil { // a run that was killed
		t.Fatal(err)
	}
	if err := CheckMerge(stale, "cascade", "cascade-limited"); err != nil {
		t.Fatalf("CheckMerge over a dead run's entries: %v", err)
	}
	k, err := MergeKubeconfig(stale, cascadeContexts()...)
	if err != nil {
		t.Fatal(err)
	}
	if kc := load(t, stale); len(kc.Contexts) != 2 {
		t.Fatalf("contexts after replacing a dead run's: %v", kc.Contexts)
	}
	if err := k.Remove(); err != nil {
		t.Fatal(err)
	}
}

// TestMergeFollowsASymlink: a symlinked kubeconfig (dotfiles managers do
// this) is written through, and the link stays a link.
func TestMergeFollowsASymlink(t *testing.T) {
	real := writeUsers(t, 0o600)
	link := filepath.Join(t.TempDir(), "config")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	k, err := MergeKubeconfig(link, cascadeContexts()...)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced: %v %v", st, err)
	}
	if load(t, real).CurrentContext != "cascade" {
		t.Fatal("the merge did not reach the link's target")
	}
	if err := k.Remove(); err != nil {
		t.Fatal(err)
	}
	sameBytes(t, real, usersKubeconfig)
}

// TestMergeRefusesAnUnparsableFile: a file that is not a kubeconfig is not
// touched.
func TestMergeRefusesAnUnparsableFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes")
	const notes = "{ not: [a kubeconfig"
	if err := os.WriteFile(path, []byte(notes), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := MergeKubeconfig(path, cascadeContexts()...); err == nil || !strings.Contains(err.Error(), "does not parse") {
		t.Fatalf("MergeKubeconfig: %v", err)
	}
	sameBytes(t, path, notes)
}
