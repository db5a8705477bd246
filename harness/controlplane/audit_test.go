package controlplane_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cascade-k8s/cascade/harness/controlplane"
)

// TestAuditRecordsIdentifyActors checks what the recorder relies on: the
// GC's requests carry the controller manager's user and the GC's client
// name, the driver's do not, and a request's [RequestReceived,
// StageTimestamp] interval lies within the client's call and return.
func TestAuditRecordsIdentifyActors(t *testing.T) {
	g, ctx, ns := NewWithT(t), context.Background(), newNamespace(t)
	cms := cs.CoreV1().ConfigMaps(ns)
	owner := createConfigMap(t, ns, "owner", nil)
	dep := createConfigMap(t, ns, "dependent", nil, ownerRef(owner, false))

	called := time.Now().Truncate(time.Microsecond) // audit timestamps have microsecond precision
	g.Expect(cms.Delete(ctx, owner.Name, metav1.DeleteOptions{})).To(Succeed())
	returned := time.Now()

	var driver controlplane.AuditRecord
	g.Eventually(func() bool {
		for _, r := range auditRecords(g) {
			if r.Username == driverUser && r.Verb == "delete" && r.Namespace == ns && r.Name == owner.Name {
				driver = r
				return true
			}
		}
		return false
	}).WithTimeout(timeout).WithPolling(poll).Should(BeTrue(), "the driver's DELETE in the audit log")
	g.Expect(driver).To(MatchFields(IgnoreExtras, Fields{
		"Stage": Equal(controlplane.StageResponseComplete), "Level": Equal("RequestResponse"),
		"APIGroup": BeEmpty(), "APIVersion": Equal("v1"), "Resource": Equal("configmaps"), "Subresource": BeEmpty(),
		"UserAgent": Equal("cascade-smoke"), "Code": Equal(200),
	}))
	g.Expect(driver.IsGarbageCollector()).To(BeFalse())
	g.Expect(driver.ControllerClient()).To(BeEmpty())
	g.Expect(driver.RequestReceived).NotTo(BeTemporally("<", called))
	g.Expect(driver.StageTimestamp).NotTo(BeTemporally("<", driver.RequestReceived))
	g.Expect(driver.StageTimestamp).NotTo(BeTemporally(">", returned))
	// An immediate delete answers with a Status naming the removed object.
	var status metav1.Status
	g.Expect(json.Unmarshal(driver.ResponseObject, &status)).To(Succeed())
	g.Expect(status.Status).To(Equal(metav1.StatusSuccess))
	g.Expect(status.Details).To(HaveValue(HaveField("UID", owner.UID)))

	gc := gcRequest(g, "delete", "configmaps", ns, dep.Name)
	g.Expect(gc.Username).To(Equal("system:kube-controller-manager"))
	g.Expect(gc.Groups).To(ContainElement("system:masters"))
	g.Expect(gc.UserAgent).To(Equal("kube-controller-manager/" + controlplane.KubeVersion +
		" (" + runtime.GOOS + "/" + runtime.GOARCH + ") kubernetes/0000000/generic-garbage-collector"))
	g.Expect(gc.ControllerClient()).To(Equal(controlplane.GarbageCollectorClient))
	// The GC reacts to the owner's deletion, so it cannot have asked before
	// the driver did. (Its request may start before the driver's audit
	// record is written, so StageTimestamp is no bound.)
	g.Expect(gc.RequestReceived).NotTo(BeTemporally("<", driver.RequestReceived))
}

// TestFollowAudit reads the live audit log as kube-apiserver appends to it.
func TestFollowAudit(t *testing.T) {
	g, ns := NewWithT(t), newNamespace(t)
	r, err := cp.FollowAudit()
	g.Expect(err).NotTo(HaveOccurred())
	defer r.Close()
	cm := createConfigMap(t, ns, "followed", nil)

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		rec, err := r.Next(ctx)
		g.Expect(err).NotTo(HaveOccurred(), "no record of the create before the deadline")
		if rec.Verb == "create" && rec.Namespace == ns && rec.Resource == "configmaps" {
			g.Expect(rec.Code).To(Equal(201))
			g.Expect(rec.Name).To(Equal("followed"))
			g.Expect(objectMeta(g, rec.ResponseObject).UID).To(Equal(cm.UID))
			return
		}
	}
}

const sampleEvent = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"RequestResponse","auditID":"a1","stage":"ResponseComplete",` +
	`"requestURI":"/api/v1/namespaces/n/configmaps/c","verb":"patch","user":{"username":"system:kube-controller-manager","groups":["system:masters","system:authenticated"]},` +
	`"userAgent":"kube-controller-manager/v1.36.3 (linux/amd64) kubernetes/0000000/generic-garbage-collector",` +
	`"objectRef":{"resource":"configmaps","namespace":"n","name":"c","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},` +
	`"requestObject":{"metadata":{"finalizers":null}},"responseObject":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"c"}},` +
	`"requestReceivedTimestamp":"2026-01-02T03:04:05.000001Z","stageTimestamp":"2026-01-02T03:04:05.002003Z"}`

func TestParseAuditEvent(t *testing.T) {
	g := NewWithT(t)
	rec, err := controlplane.ParseAuditEvent([]byte(sampleEvent))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rec).To(MatchFields(IgnoreExtras, Fields{
		"AuditID": Equal("a1"), "Stage": Equal("ResponseComplete"), "Verb": Equal("patch"),
		"Username": Equal("system:kube-controller-manager"), "Groups": Equal([]string{"system:masters", "system:authenticated"}),
		"Resource": Equal("configmaps"), "Namespace": Equal("n"), "Name": Equal("c"), "APIVersion": Equal("v1"), "Code": Equal(200),
		"RequestReceived": BeTemporally("==", time.Date(2026, 1, 2, 3, 4, 5, 1000, time.UTC)),
		"StageTimestamp":  BeTemporally("==", time.Date(2026, 1, 2, 3, 4, 5, 2003000, time.UTC)),
	}))
	g.Expect(rec.RequestObject).To(MatchJSON(`{"metadata":{"finalizers":null}}`))
	g.Expect(rec.ResponseObject).To(MatchJSON(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"c"}}`))
	g.Expect(rec.IsGarbageCollector()).To(BeTrue())

	_, err = controlplane.ParseAuditEvent([]byte(`{"kind":"Policy","apiVersion":"audit.k8s.io/v1"}`))
	g.Expect(err).To(MatchError(ContainSubstring(`not an audit.k8s.io/v1 Event (apiVersion "audit.k8s.io/v1", kind "Policy")`)))
	_, err = controlplane.ParseAuditEvent([]byte(`{"kind":`))
	g.Expect(err).To(MatchError(ContainSubstring("not an audit event")))
}

// TestAuditReaderFollowsPartialLines checks that a line the API server has
// written only in part is returned once complete, and that a bad line is
// reported with its file and line number.
func TestAuditReaderFollowsPartialLines(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "audit.log")
	f, err := os.Create(path)
	g.Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	_, err = f.WriteString(sampleEvent + "\n" + sampleEvent[:40])
	g.Expect(err).NotTo(HaveOccurred())

	r, err := controlplane.OpenAuditLog(path)
	g.Expect(err).NotTo(HaveOccurred())
	defer r.Close()
	r.Poll = time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	first, err := r.Next(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first.AuditID).To(Equal("a1"))

	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	_, err = r.Next(short)
	g.Expect(errors.Is(err, context.DeadlineExceeded)).To(BeTrue(), "half a line is not a record: %v", err)

	_, err = f.WriteString(sampleEvent[40:] + "\n" + "not json\n")
	g.Expect(err).NotTo(HaveOccurred())
	second, err := r.Next(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(second).To(HaveField("Verb", "patch"))
	_, err = r.Next(ctx)
	g.Expect(err).To(MatchError(ContainSubstring("audit log " + path + " line 3: not an audit event")))
}

func TestAuditPolicy(t *testing.T) {
	g := NewWithT(t)
	p := controlplane.AuditPolicy()
	raw, err := json.Marshal(p)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(raw)).To(ContainSubstring(`"omitStages":["RequestReceived"]`))
	levels := make([]string, len(p.Rules))
	for i, r := range p.Rules {
		levels[i] = string(r.Level)
	}
	g.Expect(levels).To(Equal([]string{"None", "None", "RequestResponse", "Metadata", "Metadata", "RequestResponse"}))
	// The catch-all for custom resources must match any group.
	last := p.Rules[len(p.Rules)-1]
	g.Expect(last.Resources).To(BeEmpty())
	g.Expect(last.NonResourceURLs).To(BeEmpty())
}

func TestResolveBinDir(t *testing.T) {
	g := NewWithT(t)
	root := t.TempDir()
	g.Expect(os.MkdirAll(filepath.Join(root, "hack", "kube"), 0o755)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(root, "hack", "kube", "build.sh"), nil, 0o644)).To(Succeed())
	sub := filepath.Join(root, "a", "b")
	g.Expect(os.MkdirAll(sub, 0o755)).To(Succeed())
	t.Chdir(sub)
	want := filepath.Join(root, "bin", "kube", controlplane.KubeVersion)

	t.Setenv("KUBEBUILDER_ASSETS", "")
	dir, source, err := controlplane.ResolveBinDir("")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([]string{dir, source}).To(Equal([]string{want, "repository"}))
	_, err = controlplane.Start(context.Background(), controlplane.Options{})
	g.Expect(err).To(MatchError("controlplane: etcd not found in " + want + " (run 'make kube' to build the control plane)"))

	t.Setenv("KUBEBUILDER_ASSETS", "/opt/assets")
	dir, source, err = controlplane.ResolveBinDir("")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([]string{dir, source}).To(Equal([]string{"/opt/assets", "KUBEBUILDER_ASSETS"}))

	dir, source, err = controlplane.ResolveBinDir("/x/bin")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([]string{dir, source}).To(Equal([]string{"/x/bin", "flag"}))

	// Found etcd and kube-apiserver, but not the controller manager asked for.
	bin := t.TempDir()
	for _, name := range []string{controlplane.EtcdBinary, controlplane.APIServerBinary} {
		g.Expect(os.WriteFile(filepath.Join(bin, name), nil, 0o755)).To(Succeed())
	}
	_, err = controlplane.Start(context.Background(), controlplane.Options{BinDir: bin, ControllerManager: true})
	g.Expect(err).To(MatchError("controlplane: kube-controller-manager not found in " + bin +
		" (directory from flag; run 'make kube' to build the control plane into bin/kube/" + controlplane.KubeVersion + ")"))

	t.Chdir(t.TempDir())
	t.Setenv("KUBEBUILDER_ASSETS", "")
	_, _, err = controlplane.ResolveBinDir("")
	g.Expect(err).To(MatchError(ContainSubstring("no cascade checkout (hack/kube/build.sh) at or above")))
}

// TestAuditReaderReadIdle checks that ReadIdle returns what is in the log
// once it has been quiet for the idle time, then only what came after,
// and nothing (no error) when nothing did.
func TestAuditReaderReadIdle(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "audit.log")
	f, err := os.Create(path)
	g.Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	_, err = f.WriteString(sampleEvent + "\n" + sampleEvent + "\n")
	g.Expect(err).NotTo(HaveOccurred())

	r, err := controlplane.OpenAuditLog(path)
	g.Expect(err).NotTo(HaveOccurred())
	defer r.Close()
	r.Poll = time.Millisecond
	ctx := context.Background()
	recs, err := r.ReadIdle(ctx, 30*time.Millisecond)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(recs).To(HaveLen(2))

	recs, err = r.ReadIdle(ctx, 30*time.Millisecond)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(recs).To(BeEmpty())

	_, err = f.WriteString(sampleEvent + "\n")
	g.Expect(err).NotTo(HaveOccurred())
	recs, err = r.ReadIdle(ctx, 30*time.Millisecond)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(recs).To(HaveLen(1))
}

// TestAuditReaderReadIdleOnABusyLog: a log that is never quiet (the real
// GC passing a virtual node between two identities GETs without end)
// still ends a read, at the first request received idle after the call
// began, which the next read returns first: nothing is lost.
func TestAuditReaderReadIdleOnABusyLog(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "audit.log")
	f, err := os.Create(path)
	g.Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	stamped := func(at time.Time) string {
		return strings.Replace(sampleEvent, `"requestReceivedTimestamp":"2026-01-02T03:04:05.000001Z"`, `"requestReceivedTimestamp":"`+at.UTC().Format("2006-01-02T15:04:05.000000Z07:00")+`"`, 1)
	}
	_, err = f.WriteString(stamped(time.Now()) + "\n")
	g.Expect(err).NotTo(HaveOccurred())
	done := make(chan struct{})
	go func() { // a record every 2 ms, never 30 ms of quiet
		for {
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
				_, _ = f.WriteString(stamped(time.Now()) + "\n")
			}
		}
	}()
	r, err := controlplane.OpenAuditLog(path)
	g.Expect(err).NotTo(HaveOccurred())
	defer r.Close()
	r.Poll = time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first, err := r.ReadIdle(ctx, 30*time.Millisecond)
	g.Expect(err).NotTo(HaveOccurred(), "the read must end on a busy log")
	g.Expect(first).NotTo(BeEmpty())
	second, err := r.ReadIdle(ctx, 30*time.Millisecond)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(second).NotTo(BeEmpty(), "the record read past the first read's end comes first in the next")
	close(done)
	last := first[len(first)-1].RequestReceived
	g.Expect(second[0].RequestReceived.Before(last)).To(BeFalse(), "records in order, none repeated")
}
