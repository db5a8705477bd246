// Package kinebuild_test holds a reproducer of a kine bug that cascade's
// fuzzing on kine found (README.md, "Known kine bugs"). It is not part of
// `make test` (this is a module of its own); run it against the kine that
// `make kine` built with
//
//	cd hack/kine && go test -count=1 .
//
// or against another build with CASCADE_KINE=/path/to/kine.
package kinebuild_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// kineVersion is the release build.sh builds by default.
const kineVersion = "v0.17.5"

// startKine runs kine on SQLite in a temporary directory and returns a
// client of its etcd API.
func startKine(t *testing.T) *clientv3.Client {
	t.Helper()
	bin := os.Getenv("CASCADE_KINE")
	if bin == "" {
		_, file, _, _ := runtime.Caller(0)
		bin = filepath.Join(filepath.Dir(file), "..", "..", "bin", "kine", kineVersion, "kine")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("no kine binary at %s: run 'make kine' first", bin)
	}
	dir := t.TempDir()
	socket := filepath.Join(dir, "kine.sock")
	cmd := exec.Command(bin, "--listen-address=unix://"+socket, "--endpoint=sqlite://"+filepath.Join(dir, "state.db"), "--metrics-bind-address=0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(socket); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kine did not listen on %s", socket)
		}
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{"unix://" + socket}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// create is kube-apiserver's create (k8s.io/apiserver storage/etcd3
// store.Create): a put if the key has no current revision; the object's
// resourceVersion is the transaction's header revision.
func create(ctx context.Context, c *clientv3.Client, key string) (int64, error) {
	resp, err := c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).Then(clientv3.OpPut(key, "v")).Commit()
	switch {
	case err != nil:
		return 0, err
	case !resp.Succeeded:
		return 0, fmt.Errorf("create %s: the key exists (header revision %d)", key, resp.Header.Revision)
	}
	return resp.Header.Revision, nil
}

// A create answers the revision it wrote, as etcd's does: kube-apiserver
// takes it as the new object's resourceVersion. kine v0.17.3 to v0.17.5
// break this for a key that existed before and was deleted: their
// LogStructured.Create retries the insert after the key's tombstone with a
// shadowed rev variable, returns 0, and its deferred adjustRevision then
// answers the current revision, which other writers move on meanwhile.
func TestCreateOfADeletedKeyAnswersItsRevision(t *testing.T) {
	c := startKine(t)
	ctx := context.Background()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 { // writers of other keys, as kube-apiserver's other clients
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				_, _ = c.Put(ctx, fmt.Sprintf("/registry/other/%d", w), fmt.Sprint(i))
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()

	const key = "/registry/configmaps/ns/a"
	for i := range 200 {
		rev, err := create(ctx, c, key)
		if err != nil {
			t.Fatalf("create %d: %v", i+1, err)
		}
		got, err := c.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if mod := got.Kvs[0].ModRevision; mod != rev {
			t.Fatalf("create %d of %s answered revision %d, but the key's mod_revision is %d (re-created after a delete: %v)", i+1, key, rev, mod, i > 0)
		}
		// kube-apiserver's delete (store.conditionalDelete); kine serves
		// no DeleteRange
		del, err := c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).Then(clientv3.OpDelete(key)).Else(clientv3.OpGet(key)).Commit()
		switch {
		case err != nil:
			t.Fatal(err)
		case !del.Succeeded:
			t.Fatalf("delete %d of %s at its mod_revision %d failed", i+1, key, rev)
		}
	}
}
