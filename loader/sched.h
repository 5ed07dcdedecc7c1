/* sched.h - dependency scheduler: ready queue, states, failure propagation.
 *
 * Pure logic, no I/O. A module becomes ready the moment every dependency in
 * the plan has completed successfully; ready modules are handed out in FIFO
 * order (initially file order), each exactly once.
 */
#ifndef BL_SCHED_H
#define BL_SCHED_H

#include "plan.h"

enum sched_state {
	SCHED_WAITING = 0, /* some dependency not yet live */
	SCHED_READY,       /* in the ready queue */
	SCHED_CLAIMED,     /* handed out, outcome pending */
	SCHED_OK,          /* live (loaded, exists, already-live, builtin) */
	SCHED_FAILED,      /* failed, timed out, worker died */
	SCHED_DEP_FAILED,  /* never started: a dependency failed */
};

struct sched {
	int n;
	unsigned char *state;
	int *pending;  /* dependencies not yet OK */
	int *rdoff;    /* reverse edges in CSR form: dependents of i are */
	int *rd;       /*   rd[rdoff[i] .. rdoff[i+1]) */
	int *queue;    /* ready FIFO; each module enters it at most once */
	int qhead, qtail;
	int *cause;    /* for SCHED_DEP_FAILED: index of the failed module */
	int ndone;     /* modules in a final state */
};

int sched_init(struct sched *s, const struct bl_plan *p);
void sched_free(struct sched *s);

/* Claim the next ready module (moves it to CLAIMED); -1 when none ready. */
int sched_claim(struct sched *s);

/* Number of modules currently ready (not yet claimed). */
int sched_nready(const struct sched *s);

/* Report the outcome of a claimed module. On failure every transitive
 * dependent still waiting becomes DEP_FAILED; their indices are appended to
 * depfailed (room for n entries, may be NULL) in propagation order and their
 * count returned. Returns -1 if idx was not claimed. */
int sched_complete(struct sched *s, int idx, int ok, int *depfailed);

/* 1 when every module has reached a final state. */
int sched_finished(const struct sched *s);

#endif
