/*
 * fanout.pml: the scope `fanout-N` of cascade's checker, in Promela.
 *
 * One Secret `owner` and N ConfigMaps d1..dN, each with an ownerReference
 * to owner (not controller, no blockOwnerDeletion), settled: the garbage
 * collector's graph has observed every object and every queue is empty.
 * The client may send `delete secret/owner` (Background) once; the GC
 * then delivers the owner's DELETED event, runs attemptToDelete for each
 * dependent, sends the DELETEs it decided and delivers the dependents'
 * DELETED events, in every interleaving. The adopting controller watches
 * neither Secrets nor ConfigMaps, so it never acts and is left out.
 *
 * This mirrors model/ (apiserver.go, watch.go, gc_graph.go,
 * gc_workers.go) for this scope: one `do` option per step of the Go
 * model's successor function (model.Enabled plus the client op), each a
 * d_step, so that one Go transition is one SPIN transition and the states
 * SPIN stores are exactly the Go checker's distinct states. The scratch
 * variables (event fields, a loop index) are reset before each d_step
 * ends, the only process is always at the head of its loop, and every
 * field of a removed object or dropped write is cleared, so nothing in
 * the state vector distinguishes states the Go model does not.
 *
 * UIDs: 0 is "none", secret/owner is 1, cm/d<k+1> is k+2 (k = 0..N-1).
 *
 * Build: spin -a -DN=8 fanout.pml && gcc -O2 -DNOREDUCE -DBFS -DSAFETY ...
 * (bench-check.sh does it). N defaults to 3 and may be at most 12.
 */

#ifndef N
#define N 3
#endif
#if N < 1 || N > 12
#error "fanout.pml: 1 <= N <= 12"
#endif

#define OWNER   1           /* UID of secret/owner */
#define DEP(k)  ((k) + 2)   /* UID of cm/d<k+1> */
#define NUID    (N + 2)     /* UIDs 0..N+1 */

mtype = { ADDED, MODIFIED, DELETED };   /* watch event types */

/* ---- API store ---------------------------------------------------- */

/* secret/owner: live, no ownerReferences, resourceVersion 1 */
bit  secretLive = 1;
byte secretRV = 1;
/* cm/d<k+1>: live; resourceVersion; its one ownerReference (a UID; kind
 * Secret and name owner are the same for all and left implicit) */
bit  cmLive[N] = 1;
byte cmRV[N] = 1;
byte cmOwnerRef[N] = OWNER;

/* ---- the GC's informers: one FIFO per resource, and the cache ------ */

chan secretQ = [1] of { mtype, byte };  /* Secret events: type, UID */
chan cmQ = [N] of { mtype, byte };      /* ConfigMap events: type, UID */
bit  secretCached = 1;                  /* last delivered version known */
bit  cmCached[N] = 1;

/* ---- the GC's graph (uidToNode) ------------------------------------ */

bit  ownerNode = 1;          /* node for secret/owner */
bit  ownerDependents[N] = 1; /* its dependents (cm/d<k+1> for each k) */
bit  cmNode[N] = 1;          /* node for cm/d<k+1>; its owners: cmOwnerRef */
byte cmNodeOwner[N] = OWNER; /* the owner UID the node last observed */

/* ---- the GC's work queues and decided writes ----------------------- */

bit  absent[NUID];           /* absentOwnerCache, by UID */
bit  attemptToDelete[NUID];  /* the attemptToDelete work queue (a set) */
/* in-flight DELETE of cm/d<k+1>: UID and resourceVersion preconditions
 * (0: no write in flight); the policy is always Background here */
byte writeUID[N];
byte writeRV[N];

/* ---- the client's one operation ------------------------------------ */

bit  deleteSent;             /* `delete secret/owner` used (its budget) */

/* ---- scratch ------------------------------------------------------- */

/* Event fields and a loop index, used only inside a d_step and reset to
 * 0 before it ends, so every stored state has them 0. (They cannot be
 * `hidden`: pan refuses BFS with hidden variables.) */
byte evType, evUID, j;

/* The client's DELETE of secret/owner, Background: no finalizers to add,
 * so the store removes it at once and the GC's Secret informer queues a
 * DELETED event (Store.Delete; notify). */
inline clientDeleteOwner() {
	deleteSent = 1;
	if
	:: secretLive ->
		secretLive = 0;
		secretRV = 0;
		secretQ!DELETED,OWNER
	:: else -> skip /* 404 */
	fi
}

/* `gc deliver secret/owner`: pop the head Secret event; the informer
 * drops its cache entry; processGraphChanges removes the owner's node,
 * records its identity in absentOwnerCache and queues every dependent
 * for attemptToDelete. */
inline deliverSecret() {
	secretQ?evType,evUID;
	assert(evType == DELETED && evUID == OWNER);
	secretCached = 0;
	if
	:: ownerNode ->
		ownerNode = 0;
		for (j : 0 .. N-1) {
			if
			:: ownerDependents[j] ->
				absent[OWNER] = 1;
				attemptToDelete[DEP(j)] = 1;
				ownerDependents[j] = 0
			:: else -> skip
			fi
		}
	:: else -> skip
	fi;
	evType = 0; evUID = 0; j = 0
}

/* `gc deliver cm/...`: pop the head ConfigMap event (FIFO order); the
 * informer drops its cache entry and the graph builder removes the node
 * (its owner's node, if still there, forgets the dependent). */
inline deliverConfigMap() {
	cmQ?evType,evUID;
	assert(evType == DELETED && evUID >= DEP(0) && evUID < NUID);
	j = evUID - DEP(0);
	cmCached[j] = 0;
	if
	:: cmNode[j] ->
		cmNode[j] = 0;
		if
		:: cmNodeOwner[j] == OWNER && ownerNode -> ownerDependents[j] = 0
		:: else -> skip
		fi;
		cmNodeOwner[j] = 0
	:: else -> skip
	fi;
	evType = 0; evUID = 0; j = 0
}

/* `gc attemptToDelete cm/d<k+1>`: take the item off the queue; with its
 * node still in the graph, GET it live; its one ownerReference is
 * dangling if absentOwnerCache has the owner or a live GET of the owner
 * finds nothing with that UID (then the cache learns it). A dangling
 * only owner means: DELETE with the UID and resourceVersion read, in the
 * Background. The write is left in flight. */
inline attemptToDeleteItem(k) {
	attemptToDelete[DEP(k)] = 0;
	if
	:: cmNode[k] ->
		assert(cmLive[k]);  /* the GET finds it: no virtual events here */
		if
		:: absent[cmOwnerRef[k]] ->
			writeUID[k] = DEP(k);
			writeRV[k] = cmRV[k]
		:: else ->
			if
			:: secretLive && cmOwnerRef[k] == OWNER -> skip /* solid: done */
			:: else ->
				absent[cmOwnerRef[k]] = 1;
				writeUID[k] = DEP(k);
				writeRV[k] = cmRV[k]
			fi
		fi
	:: else -> skip  /* node gone: forgotten */
	fi
}

/* `gc delete cm/d<k+1>`: the DELETE with its preconditions. It lands
 * (the object is removed, its DELETED event queued for the GC) or, on a
 * conflict, the item goes back on the queue; either way the write is no
 * longer in flight. */
inline sendDelete(k) {
	if
	:: cmLive[k] && DEP(k) == writeUID[k] && cmRV[k] == writeRV[k] ->
		assert(!secretLive);  /* no solid owner collected */
		cmLive[k] = 0;
		cmRV[k] = 0;
		cmOwnerRef[k] = 0;
		cmQ!DELETED,DEP(k)
	:: else ->
		assert(false)         /* 404/409: unreachable in fanout-N */
	fi;
	writeUID[k] = 0;
	writeRV[k] = 0
}

/* One option per dependent k for the two per-item GC steps. */
#define ITEM(k) \
	:: d_step { attemptToDelete[DEP(k)] && writeUID[k] == 0 -> attemptToDeleteItem(k) } \
	:: d_step { writeUID[k] != 0 -> sendDelete(k) }

active proctype system()
{
end:
	do
	:: d_step { !deleteSent -> clientDeleteOwner() }
	:: d_step { nempty(secretQ) -> deliverSecret() }
	:: d_step { nempty(cmQ) -> deliverConfigMap() }
	ITEM(0)
#if N > 1
	ITEM(1)
#endif
#if N > 2
	ITEM(2)
#endif
#if N > 3
	ITEM(3)
#endif
#if N > 4
	ITEM(4)
#endif
#if N > 5
	ITEM(5)
#endif
#if N > 6
	ITEM(6)
#endif
#if N > 7
	ITEM(7)
#endif
#if N > 8
	ITEM(8)
#endif
#if N > 9
	ITEM(9)
#endif
#if N > 10
	ITEM(10)
#endif
#if N > 11
	ITEM(11)
#endif
	od
}
