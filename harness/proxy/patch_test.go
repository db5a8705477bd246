package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// The GC's PATCH of a dependent names, in its body, the owner whose
// reference it removes (deleteOwnerRefStrategicMergePatch); the proxy
// records those UIDs and passes the body on unchanged.
func TestPatchNamesTheOwnersItRemoves(t *testing.T) {
	for _, c := range []struct {
		name, body string
		want       []string
	}{
		{"an orphan worker's PATCH of a dependent", `{"metadata":{"ownerReferences":[{"$patch":"delete","uid":"owner-1"}],"uid":"dep-1"}}`, []string{"owner-1"}},
		{"dangling references removed", `{"metadata":{"ownerReferences":[{"$patch":"delete","uid":"a"},{"$patch":"delete","uid":"b"}],"uid":"dep"}}`, []string{"a", "b"}},
		{"an unblock", `{"metadata":{"ownerReferences":[{"uid":"a","blockOwnerDeletion":false}],"uid":"dep"}}`, nil},
		{"removeFinalizer's merge patch", `{"metadata":{"resourceVersion":"7","finalizers":null}}`, nil},
		{"a JSON merge patch of the references that stay", `{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"b","uid":"b"}],"uid":"dep"}}`, nil},
		{"no JSON", `not json`, nil},
	} {
		if got := RemovedOwners([]byte(c.body)); !slices.Equal(got, c.want) {
			t.Errorf("%s: RemovedOwners = %v, want %v", c.name, got, c.want)
		}
	}

	var got string
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		got = string(b)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x","uid":"dep-1","resourceVersion":"8"}}`)
	}))
	defer upstream.Close()
	p, err := New(Options{Upstream: &rest.Config{Host: upstream.URL}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	body := `{"metadata":{"ownerReferences":[{"$patch":"delete","uid":"owner-1"}],"uid":"dep-1"}}`
	req, _ := http.NewRequest(http.MethodPatch, p.URL()+"/api/v1/namespaces/a/configmaps/x", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/strategic-merge-patch+json")
	req.Header.Set("User-Agent", "kube-controller-manager/v1.37.2 (linux/amd64) kubernetes/0000000/"+GarbageCollectorClient)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got != body {
		t.Errorf("kube-apiserver got the body %q, want %q", got, body)
	}
	ev := p.Evidence()
	if len(ev.Requests) != 1 || !slices.Equal(ev.Requests[0].RemovedOwners, []string{"owner-1"}) {
		t.Errorf("recorded %+v, want one PATCH removing owner-1", ev.Requests)
	}
}
