package proxy

import (
	"net/http/httptest"
	"testing"
)

// parseCall reads a request as kube-apiserver's RequestInfo resolver
// does: verb, resource, namespace, name, subresource, and the informer
// details (metadata only, WatchList's initial events).
func TestParseCall(t *testing.T) {
	metadataAccept := "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
	for _, c := range []struct {
		method, url, accept string
		want                Call
		informer            string
	}{
		{"GET", "/api/v1/namespaces/a/configmaps?watch=true&resourceVersion=5", "", Call{Verb: VerbWatch, Resource: "configmaps", Namespace: "a", ResourceVersionAsked: "5"}, "shared-informers/configmaps"},
		{"GET", "/apis/apps/v1/replicasets?sendInitialEvents=true&watch=1&allowWatchBookmarks=true", "", Call{Verb: VerbWatch, Group: "apps", Resource: "replicasets", InitialEvents: true}, "shared-informers/replicasets.apps"},
		{"GET", "/apis/cascade.dev/v1/herds?limit=500", metadataAccept, Call{Verb: VerbList, Group: "cascade.dev", Resource: "herds", Metadata: true}, "shared-informers/herds.cascade.dev#metadata"},
		{"GET", "/api/v1/namespaces/a/pods/p", metadataAccept, Call{Verb: VerbGet, Resource: "pods", Namespace: "a", Name: "p", Metadata: true}, ""},
		{"PATCH", "/api/v1/namespaces/a/pods/p", "", Call{Verb: VerbPatch, Resource: "pods", Namespace: "a", Name: "p"}, ""},
		{"PUT", "/api/v1/namespaces/a/finalize", "", Call{Verb: VerbUpdate, Resource: "namespaces", Name: "a", Subresource: "finalize"}, ""},
		{"DELETE", "/api/v1/namespaces/a", "", Call{Verb: VerbDelete, Resource: "namespaces", Name: "a"}, ""},
		{"DELETE", "/api/v1/namespaces/a/configmaps", "", Call{Verb: VerbDeleteCollection, Resource: "configmaps", Namespace: "a"}, ""},
		{"POST", "/apis/apps/v1/namespaces/a/replicasets/r/status", "", Call{Verb: VerbCreate, Group: "apps", Resource: "replicasets", Namespace: "a", Name: "r", Subresource: "status"}, ""},
		{"GET", "/api/v1/watch/namespaces/a/pods", "", Call{Verb: VerbWatch, Resource: "pods", Namespace: "a"}, "shared-informers/pods"},
		{"GET", "/apis/apps/v1", "", Call{Verb: VerbOther, Path: "/apis/apps/v1"}, ""},
		{"GET", "/healthz", "", Call{Verb: VerbOther, Path: "/healthz"}, ""},
	} {
		req := httptest.NewRequest(c.method, c.url, nil)
		if c.accept != "" {
			req.Header.Set("Accept", c.accept)
		}
		got := parseCall(req)
		if got != c.want {
			t.Errorf("%s %s: %+v, want %+v", c.method, c.url, got, c.want)
		}
		if c.informer != "" {
			if inf := got.Informer(SharedInformersClient); inf != c.informer {
				t.Errorf("%s %s: informer %q, want %q", c.method, c.url, inf, c.informer)
			}
		}
	}
}

// The proxy asks kube-apiserver for JSON: protobuf and CBOR media types
// leave the Accept header, the JSON alternatives (with their parameters)
// stay, and a header left empty asks for application/json.
func TestJSONAccept(t *testing.T) {
	for in, want := range map[string]string{
		"application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json",
		"application/vnd.kubernetes.protobuf, */*": "*/*",
		"application/vnd.kubernetes.protobuf":      "application/json",
		"application/cbor":                         "application/json",
		"":                                         "application/json",
		"application/json":                         "application/json",
	} {
		if got := jsonAccept(in); got != want {
			t.Errorf("jsonAccept(%q) = %q, want %q", in, got, want)
		}
	}
}

// clientName is the user agent's last segment for a kube-controller-manager
// client, the whole user agent otherwise.
func TestClientName(t *testing.T) {
	for ua, want := range map[string]string{
		"kube-controller-manager/v1.36.3 (linux/amd64) kubernetes/0000000/generic-garbage-collector": GarbageCollectorClient,
		"kube-controller-manager/v1.36.3 (linux/amd64) kubernetes/0000000/shared-informers":          SharedInformersClient,
		"curl/8.0": "curl/8.0",
	} {
		if got := clientName(ua); got != want {
			t.Errorf("clientName(%q) = %q, want %q", ua, got, want)
		}
	}
}
