package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// objectMeta is the part of an object the evidence records.
type objectMeta struct {
	Metadata struct {
		Name            string            `json:"name"`
		Namespace       string            `json:"namespace"`
		UID             string            `json:"uid"`
		ResourceVersion string            `json:"resourceVersion"`
		Annotations     map[string]string `json:"annotations"`
		// DeletionTimestamp is set on an object being deleted
		DeletionTimestamp string `json:"deletionTimestamp"`
		// what else the model has of an object (modelShape)
		Generation      int64             `json:"generation"`
		Labels          map[string]string `json:"labels"`
		OwnerReferences json.RawMessage   `json:"ownerReferences"`
		Finalizers      []string          `json:"finalizers"`
	} `json:"metadata"`
	Items []json.RawMessage `json:"items"`
	// Details are a Status's (a DELETE's answer when the object is gone
	// at once)
	Details struct {
		UID string `json:"uid"`
	} `json:"details"`
	Kind   string `json:"kind"`
	Reason string `json:"reason"`
}

// answer hands a non-watch answer back whole, recording its status and
// metadata. Answers other than watches are single objects, lists or
// Status errors: the proxy reads each before writing it on.
func (p *Proxy) answer(w http.ResponseWriter, r *Request, resp *http.Response) {
	body, err := io.ReadAll(resp.Body)
	r.Answered = time.Now()
	if err != nil {
		r.Err = "reading the answer: " + err.Error()
	}
	var m objectMeta
	if json.Unmarshal(body, &m) == nil {
		r.ResourceVersion, r.UID, r.Items = m.Metadata.ResourceVersion, m.Metadata.UID, len(m.Items)
		r.Deleting = m.Metadata.DeletionTimestamp != ""
		if r.UID == "" {
			r.UID = m.Details.UID
		}
		if m.Kind == "Status" {
			r.Reason = m.Reason
		}
		if r.Verb == VerbCreate && r.Name == "" && resp.StatusCode/100 == 2 {
			r.Name = m.Metadata.Name
		}
	}
	p.done(r)
	copyHeaders(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
}

// initialEventsEnd is the annotation of the bookmark that ends a
// WatchList stream's initial events (metav1.InitialEventsAnnotationKey).
const initialEventsEnd = "k8s.io/initial-events-end"

// stream is one relayed watch: the events read from kube-apiserver and
// not yet handed on, oldest first.
type stream struct {
	mu    sync.Mutex
	queue []queued
	done  bool          // kube-apiserver's side ended
	gone  bool          // the relay ended: queue nothing more
	err   string        // why kube-apiserver's side ended, if not cleanly
	wake  chan struct{} // one token: queue grew or done
}

type queued struct {
	raw json.RawMessage
	ev  Delivery
}

// watchEvent is one event of a JSON watch stream (metav1.WatchEvent).
// modelShape is what the model has of the object, as one string: its
// uid, generation (which every spec change and the deletion bump),
// labels, ownerReferences, finalizers and deletionTimestamp. Two events
// of an object with the same shape differ only in what the model does
// not have: status, annotations, managed fields.
func (m objectMeta) modelShape() string {
	md := m.Metadata
	labels, _ := json.Marshal(md.Labels) // map keys sorted
	return fmt.Sprintf("%s|%d|%s|%s|%q|%s", md.UID, md.Generation, labels, md.OwnerReferences, md.Finalizers, md.DeletionTimestamp)
}

type watchEvent struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// expired is the error event that ends a stream for the informer-relist
// fault: a 410 Expired Status, which client-go's reflector takes as its
// resourceVersion having been compacted, so it lists again
// (reflector.go: isExpiredError).
var expired = []byte(`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"cascade proxy: watch ended by the informer-relist fault","reason":"Expired","code":410}}`)

// relay hands a watch's events to kube-controller-manager one by one: a
// reader goroutine queues each event as it comes from kube-apiserver, and
// this goroutine asks the Controller for each in order and writes it on,
// flushing it at once.
func (p *Proxy) relay(w http.ResponseWriter, ctx context.Context, r *Request, resp *http.Response) {
	s := &stream{wake: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		resp.Body.Close()
		s.mu.Lock()
		left := len(s.queue)
		s.queue, s.gone = nil, true
		if s.err != "" && r.Err == "" {
			r.Err = s.err
		}
		s.mu.Unlock()
		p.held.Add(-int64(left))
		r.Answered = time.Now()
		p.rec.request(*r)
		if c := p.opts.Controller; c != nil {
			c.Ended(r)
		}
	}()
	go p.read(s, r, resp.Body)

	copyHeaders(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}
	for {
		s.mu.Lock()
		if len(s.queue) == 0 {
			done := s.done
			s.mu.Unlock()
			if done {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-p.closed:
				return
			case <-s.wake:
			}
			continue
		}
		head := s.queue[0]
		s.mu.Unlock()
		verdict := Pass
		if c := p.opts.Controller; c != nil {
			var err error
			if verdict, err = c.Deliver(ctx, r, &head.ev); err != nil {
				return
			}
		}
		s.mu.Lock()
		if len(s.queue) > 0 {
			s.queue = s.queue[1:]
		}
		s.mu.Unlock()
		p.held.Add(-1)
		if verdict == Break {
			head.ev.Fault = "relist"
			p.rec.delivery(head.ev) // dropped: Delivered stays zero
			_, err := w.Write(append(bytes.Clone(expired), '\n'))
			p.rec.delivery(Delivery{Stream: r.ID, Client: r.Client, Informer: head.ev.Informer, Type: "ERROR",
				Received: time.Now(), Delivered: time.Now(), Fault: "relist"})
			if err == nil && flusher != nil {
				flusher.Flush()
			}
			return
		}
		if _, err := w.Write(append(head.raw, '\n')); err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
		head.ev.Delivered = time.Now()
		p.rec.delivery(head.ev)
	}
}

// read decodes a watch's events as kube-apiserver sends them and queues
// each on s; it marks s done when the stream ends.
func (p *Proxy) read(s *stream, r *Request, body io.Reader) {
	defer func() {
		s.mu.Lock()
		s.done = true
		s.mu.Unlock()
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}()
	informer := r.Informer(r.processClient())
	initial := r.InitialEvents
	dec := json.NewDecoder(body)
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if !errors.Is(err, io.EOF) {
				s.mu.Lock()
				s.err = "watch: " + err.Error()
				s.mu.Unlock()
			}
			return
		}
		ev := Delivery{Stream: r.ID, Client: r.Client, Informer: informer, Received: time.Now()}
		var we watchEvent
		if json.Unmarshal(raw, &we) == nil {
			ev.Type = we.Type
			var m objectMeta
			if json.Unmarshal(we.Object, &m) == nil {
				md := m.Metadata
				ev.Namespace, ev.Name, ev.UID, ev.ResourceVersion = md.Namespace, md.Name, md.UID, md.ResourceVersion
				ev.InitialEventsEnd = we.Type == "BOOKMARK" && md.Annotations[initialEventsEnd] == "true"
				ev.Shape = m.modelShape()
			}
		}
		ev.Initial = initial
		if ev.InitialEventsEnd {
			initial = false
		}
		s.mu.Lock()
		if s.gone {
			s.mu.Unlock()
			return
		}
		p.held.Add(1)
		s.queue = append(s.queue, queued{raw: raw, ev: ev})
		s.mu.Unlock()
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}
