package controlplane

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// Restart is what RestartAPIServer measured.
type Restart struct {
	// Stopped is how long kube-apiserver took to stop after SIGTERM: its
	// graceful shutdown, which finishes the requests it has received (and
	// writes their audit records) before it exits.
	Stopped time.Duration
	// Down is how long nothing listened: from the stop's end until the
	// new process answered /healthz.
	Down time.Duration
	// Killed says the graceful stop outlasted envtest's stop timeout and
	// the process was killed (SIGKILL): the restart was a crash, after
	// which a write it applied may lack its audit record.
	Killed bool
}

// apiServerKillWait bounds the wait for a kube-apiserver killed after its
// graceful stop timed out to be gone, so that its port is free.
const apiServerKillWait = 10 * time.Second

// RestartAPIServer stops kube-apiserver and starts it again on the same
// etcd, port, certificates, flags and audit log, as a rolling restart of
// a control-plane node does: etcd keeps every object, clients keep their
// configurations and credentials, and the new process appends to the
// audit log (its log backend opens the file for appending), so a reader
// following the log (FollowAudit) reads on across the restart.
//
// The stop is graceful (SIGTERM, then SIGKILL after 20 s): kube-apiserver
// stops accepting connections, finishes the requests it has received and
// writes their audit records, then exits. If it is killed, the restart
// goes on as after a crash (Restart.Killed) once the old process is
// gone. A request that reaches it in between, or while it is down, fails
// at the client with a connection error and no answer; the server never
// saw it. Watches end and their clients (informers,
// kube-controller-manager) relist and watch again.
//
// It returns once the new process serves (its /healthz answers ok).
// Processes lists the new process afterwards. It must not run
// concurrently with itself or with Stop.
func (cp *ControlPlane) RestartAPIServer(ctx context.Context) (Restart, error) {
	var r Restart
	if err := ctx.Err(); err != nil {
		return r, fmt.Errorf("controlplane: restart kube-apiserver: %w", err)
	}
	api := cp.env.ControlPlane.APIServer
	begin := time.Now()
	if err := api.Stop(); err != nil {
		// envtest's process.State.Stop kills a process whose graceful
		// stop outlasts its StopTimeout and reports "timeout waiting for
		// process kube-apiserver to stop"; any other error leaves it as
		// it was.
		if !strings.Contains(err.Error(), "timeout waiting for process") {
			return r, fmt.Errorf("controlplane: restart kube-apiserver: stop: %s", oneLine(err.Error()))
		}
		if gone := cp.waitAPIServersGone(apiServerKillWait); !gone {
			return r, fmt.Errorf("controlplane: restart kube-apiserver: stop: %s, and the killed process was still running %s later", oneLine(err.Error()), apiServerKillWait)
		}
		r.Killed = true
	}
	r.Stopped = time.Since(begin)
	// Start closed the log file it gave the first process (the child
	// holds its own descriptor); the new one appends to the same log.
	log, err := os.OpenFile(cp.APIServerLog(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return r, fmt.Errorf("controlplane: restart kube-apiserver: %w", err)
	}
	defer log.Close()
	api.Out, api.Err = log, log
	down := time.Now()
	if err := api.Start(); err != nil {
		return r, fmt.Errorf("controlplane: restart kube-apiserver: start: %s; last kube-apiserver log line: %s",
			oneLine(err.Error()), lastLine(cp.APIServerLog()))
	}
	r.Down = time.Since(down)
	procs := findProcesses(map[string]string{APIServerBinary: "--cert-dir=" + api.CertDir})
	// keep the old process in the list: Survivors then reports it should
	// it have outlived its stop
	cp.procs = append(slices.Clone(cp.procs), procs...)
	return r, nil
}

// RestartControllerManager kills kube-controller-manager (SIGKILL to its
// process group: a crash, not a graceful stop) and starts it again with
// the same kubeconfig, flags and log, as a control-plane node's
// controller manager is restarted after a crash. Its requests in flight
// are cut off: a write it sent may or may not have been applied, and its
// informers, graph and work queues start empty; the new process lists
// everything again. It returns once the new process's garbage collector
// collects (the probe Start waits for; when it runs the GC), bounded by
// timeout. It must not run concurrently with itself or with Stop.
func (cp *ControlPlane) RestartControllerManager(ctx context.Context, timeout time.Duration) error {
	cp.kcmMu.Lock()
	defer cp.kcmMu.Unlock()
	if cp.kcm == nil {
		return fmt.Errorf("controlplane: restart kube-controller-manager: it does not run")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("controlplane: restart kube-controller-manager: %w", err)
	}
	if err := cp.kcm.kill(); err != nil {
		return err
	}
	m, err := startControllerManager(cp, cp.kcmKubeconfig, "kube-controller-manager.log", cp.kcmControllers)
	if err != nil {
		return err
	}
	cp.kcm = m
	cp.procs = append(slices.Clone(cp.procs), Process{Name: ControllerManagerBinary, PID: m.cmd.Process.Pid})
	if slices.Contains(cp.kcmControllers, "garbagecollector") {
		return m.waitCollecting(ctx, cp.Config, timeout)
	}
	return nil
}

// waitAPIServersGone waits up to limit for every kube-apiserver process
// cp started to have exited, and reports whether they have.
func (cp *ControlPlane) waitAPIServersGone(limit time.Duration) bool {
	running := func(p Process) bool { return p.Name == APIServerBinary && p.Running() }
	for deadline := time.Now().Add(limit); slices.ContainsFunc(cp.procs, running); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}
