package controlplane

import "time"

// SetAPIServerStopTimeout sets the stop timeout envtest gives the next
// kube-apiserver process cp starts (the running one keeps its own).
func SetAPIServerStopTimeout(cp *ControlPlane, d time.Duration) {
	cp.env.ControlPlane.APIServer.StopTimeout = d
}
