package controlplane

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// LimitedUser is the principal traces call as=limited.
const LimitedUser = "cascade-limited"

// limitedRules grant every verb on the resources cascade's traces use, but
// no subresource: in particular not `update` on `<owner>/finalizers`, which
// OwnerReferencesPermissionEnforcement requires to set blockOwnerDeletion.
var limitedRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Verbs: []string{"*"}, Resources: []string{"pods", "configmaps", "secrets", "replicationcontrollers", "events", "namespaces", "persistentvolumes"}},
	{APIGroups: []string{"apps"}, Verbs: []string{"*"}, Resources: []string{"deployments", "replicasets", "statefulsets"}},
	{APIGroups: []string{"batch"}, Verbs: []string{"*"}, Resources: []string{"jobs", "cronjobs"}},
	{APIGroups: []string{"apiextensions.k8s.io"}, Verbs: []string{"*"}, Resources: []string{"customresourcedefinitions"}},
	{APIGroups: []string{"cascade.dev"}, Verbs: []string{"*"}, Resources: []string{"herds", "widgets", "gizmos"}},
}

// Limited returns the configuration of LimitedUser, provisioning the user
// and its RBAC the first time: a principal that may create, update and
// delete everything cascade's traces touch, but may not set
// blockOwnerDeletion (403 from OwnerReferencesPermissionEnforcement).
func (cp *ControlPlane) Limited(ctx context.Context) (*rest.Config, error) {
	cfg, err := cp.AddUser(envtest.User{Name: LimitedUser})
	if err != nil {
		return nil, fmt.Errorf("controlplane: provision %s: %w", LimitedUser, err)
	}
	kube, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return nil, err
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: LimitedUser}, Rules: limitedRules}
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("controlplane: role for %s: %w", LimitedUser, err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: LimitedUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: LimitedUser},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: LimitedUser}},
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("controlplane: binding for %s: %w", LimitedUser, err)
	}
	return cfg, nil
}
