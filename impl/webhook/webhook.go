package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/cascade-k8s/cascade/impl/bugs"
)

// Names under which Install registers the webhook.
const (
	// Name is the webhook's name; the API server quotes it in denials:
	// admission webhook "vdeletion.cascade.dev" denied the request: ...
	Name = "vdeletion.cascade.dev"
	// ConfigName is the ValidatingWebhookConfiguration's name.
	ConfigName = "cascade-deletion-protection"
	// Path is the URL path the server answers on.
	Path = "/validate-delete"
)

// Options configures Install.
type Options struct {
	// Bugs: protection-disabled is the one the webhook reads.
	Bugs bugs.Set
	// Host is the address the server listens on; "" means 127.0.0.1,
	// which an envtest API server on the same machine reaches.
	Host string
	// Port is the port to listen on; 0 picks a free one.
	Port int
	// ExternalHost is the host name the API server dials (and the serving
	// certificate names); "" means Host. A cluster whose API server runs
	// elsewhere (kind, a VM) needs an address of this machine it can reach.
	ExternalHost string
	// ProbeNamespace is where Install creates a labelled ConfigMap to see
	// the API server call the webhook before returning; "" means
	// "default". The probe is removed again.
	ProbeNamespace string
	// ReadyTimeout bounds the wait for the API server to call the
	// webhook; 0 means 30s.
	ReadyTimeout time.Duration
}

// Webhook is an installed, serving deletion-protection webhook.
type Webhook struct {
	opts    Options
	install *envtest.WebhookInstallOptions
	kube    kubernetes.Interface
	cancel  context.CancelFunc
	done    chan error
}

// configuration is the ValidatingWebhookConfiguration before envtest's
// install options rewrite its service reference into a URL with the
// serving CA.
func configuration(timeout int32) *admissionregistrationv1.ValidatingWebhookConfiguration {
	scope := admissionregistrationv1.AllScopes
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: ConfigName},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: Name,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
				Namespace: "default", Name: "cascade", Path: ptr.To(strings.TrimPrefix(Path, "/"))}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"},
					Resources: []string{"*"}, Scope: &scope},
			}},
			// only labelled objects reach the webhook
			ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: Label, Operator: metav1.LabelSelectorOpExists}}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To(timeout),
		}},
	}
}

// Install starts the webhook server on fresh serving certificates
// (envtest's WebhookInstallOptions makes them), registers the
// ValidatingWebhookConfiguration on the cluster cfg points at, and returns
// once the API server calls it. It works on any envtest control plane,
// with or without kube-controller-manager, and on any cluster whose API
// server can reach ExternalHost. The server runs until Stop or until ctx
// is done; Stop also removes the configuration.
func Install(ctx context.Context, cfg *rest.Config, opts Options) (_ *Webhook, retErr error) {
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.ProbeNamespace == "" {
		opts.ProbeNamespace = "default"
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 30 * time.Second
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "cascade-webhook"
	cfg.WarningHandler = rest.NoWarnings{}
	h := &protection{bugs: opts.Bugs}
	var err error
	if h.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if h.meta, err = metadata.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if h.discovery, err = discovery.NewDiscoveryClientForConfig(cfg); err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	// A registration of this name is another webhook's (a cascade
	// cluster's, another cascade gc's): installing would replace it and
	// Stop delete it, so it is refused.
	switch _, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, ConfigName, metav1.GetOptions{}); {
	case err == nil:
		return nil, fmt.Errorf("webhook: the cluster already has the webhook configuration %s (another cascade's): not replacing it; leave out --webhook, or delete it if nothing serves it", ConfigName)
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("webhook: look for %s: %w", ConfigName, err)
	}
	io := &envtest.WebhookInstallOptions{
		LocalServingHost: opts.Host, LocalServingPort: opts.Port, LocalServingHostExternalName: opts.ExternalHost,
		ValidatingWebhooks: []*admissionregistrationv1.ValidatingWebhookConfiguration{configuration(10)},
	}
	if err := io.PrepWithoutInstalling(); err != nil {
		return nil, fmt.Errorf("webhook: serving certificates: %w", err)
	}
	srv := crwebhook.NewServer(crwebhook.Options{Host: io.LocalServingHost, Port: io.LocalServingPort, CertDir: io.LocalServingCertDir})
	srv.Register(Path, &crwebhook.Admission{Handler: h})
	sctx, cancel := context.WithCancel(ctx)
	w := &Webhook{opts: opts, install: io, kube: kube, cancel: cancel, done: make(chan error, 1)}
	go func() { w.done <- srv.Start(sctx) }()
	defer func() {
		if retErr != nil {
			_ = w.Stop(context.Background())
		}
	}()
	started := srv.StartedChecker()
	if err := poll(ctx, opts.ReadyTimeout, func() error {
		select {
		case err := <-w.done:
			w.done <- err
			return fmt.Errorf("server exited: %w", err)
		default:
		}
		return started(&http.Request{})
	}); err != nil {
		return nil, fmt.Errorf("webhook: server on %s:%d did not start: %w", io.LocalServingHost, io.LocalServingPort, err)
	}
	if err := io.Install(cfg); err != nil {
		return nil, fmt.Errorf("webhook: register %s: %w", ConfigName, err)
	}
	if err := w.probe(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

// probe waits until the API server calls the webhook: a dry-run delete of
// a ConfigMap labelled Always must be denied.
func (w *Webhook) probe(ctx context.Context) error {
	cms := w.kube.CoreV1().ConfigMaps(w.opts.ProbeNamespace)
	name := "cascade-webhook-probe-" + rand.String(6)
	_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{Label: Always}}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("webhook: create probe %s/%s: %w", w.opts.ProbeNamespace, name, err)
	}
	defer func() {
		bg := context.Background()
		_, _ = cms.Patch(bg, name, "application/merge-patch+json", []byte(`{"metadata":{"labels":null}}`), metav1.PatchOptions{})
		_ = cms.Delete(bg, name, metav1.DeleteOptions{})
	}()
	want := w.opts.Bugs.Has(bugs.ProtectionDisabled)
	return poll(ctx, w.opts.ReadyTimeout, func() error {
		err := cms.Delete(ctx, name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case apierrors.IsForbidden(err) && strings.Contains(err.Error(), Name):
			return nil
		case want && err == nil:
			// a disabled webhook allows: the probe can only show it is
			// registered, which io.Install already waited for
			return nil
		case err == nil:
			return errors.New("the API server did not call the webhook yet")
		}
		return err
	})
}

// Stop removes the webhook configuration, stops the server and deletes
// the serving certificates. It is safe to call more than once.
func (w *Webhook) Stop(ctx context.Context) error {
	var errs []error
	if err := w.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, ConfigName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("webhook: remove %s: %w", ConfigName, err))
	}
	w.cancel()
	if err := <-w.done; err != nil {
		errs = append(errs, fmt.Errorf("webhook: server: %w", err))
	}
	w.done <- nil
	if err := w.install.Cleanup(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// URL is where the API server calls the webhook.
func (w *Webhook) URL() string {
	host := w.install.LocalServingHostExternalName
	if host == "" {
		host = w.install.LocalServingHost
	}
	return fmt.Sprintf("https://%s:%d%s", host, w.install.LocalServingPort, Path)
}

func poll(ctx context.Context, timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
