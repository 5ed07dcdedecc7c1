/* sched.c - dependency scheduler (pure logic). */
#include "sched.h"

#include <stdlib.h>
#include <string.h>

int sched_init(struct sched *s, const struct bl_plan *p)
{
	int n = p->n, i, j, total = 0;
	int *fill;

	memset(s, 0, sizeof(*s));
	s->n = n;
	for (i = 0; i < n; i++)
		total += p->mods[i].ndeps;
	s->state = calloc(n + 1, 1);
	s->pending = calloc(n + 1, sizeof(int));
	s->rdoff = calloc(n + 2, sizeof(int));
	s->rd = calloc(total + 1, sizeof(int));
	s->queue = calloc(n + 1, sizeof(int));
	s->cause = calloc(n + 1, sizeof(int));
	fill = calloc(n + 1, sizeof(int));
	if (!s->state || !s->pending || !s->rdoff || !s->rd || !s->queue ||
	    !s->cause || !fill) {
		free(fill);
		sched_free(s);
		return -1;
	}
	for (i = 0; i < n; i++)
		for (j = 0; j < p->mods[i].ndeps; j++)
			s->rdoff[p->mods[i].deps[j] + 1]++;
	for (i = 0; i < n; i++)
		s->rdoff[i + 1] += s->rdoff[i];
	/* dependents listed in file order */
	for (i = 0; i < n; i++) {
		for (j = 0; j < p->mods[i].ndeps; j++) {
			int d = p->mods[i].deps[j];
			s->rd[s->rdoff[d] + fill[d]++] = i;
		}
		s->pending[i] = p->mods[i].ndeps;
		s->cause[i] = -1;
	}
	free(fill);
	for (i = 0; i < n; i++) {
		if (s->pending[i] == 0) {
			s->state[i] = SCHED_READY;
			s->queue[s->qtail++] = i;
		}
	}
	return 0;
}

void sched_free(struct sched *s)
{
	free(s->state);
	free(s->pending);
	free(s->rdoff);
	free(s->rd);
	free(s->queue);
	free(s->cause);
	memset(s, 0, sizeof(*s));
}

int sched_claim(struct sched *s)
{
	int i;

	if (s->qhead == s->qtail)
		return -1;
	i = s->queue[s->qhead++];
	s->state[i] = SCHED_CLAIMED;
	return i;
}

int sched_nready(const struct sched *s)
{
	return s->qtail - s->qhead;
}

int sched_complete(struct sched *s, int idx, int ok, int *depfailed)
{
	int k, nd = 0, head;
	int *work;

	if (idx < 0 || idx >= s->n || s->state[idx] != SCHED_CLAIMED)
		return -1;
	s->ndone++;
	if (ok) {
		s->state[idx] = SCHED_OK;
		for (k = s->rdoff[idx]; k < s->rdoff[idx + 1]; k++) {
			int d = s->rd[k];
			if (s->state[d] != SCHED_WAITING)
				continue;
			if (--s->pending[d] == 0) {
				s->state[d] = SCHED_READY;
				s->queue[s->qtail++] = d;
			}
		}
		return 0;
	}
	s->state[idx] = SCHED_FAILED;
	/* breadth-first over dependents; a dependent of a failed module can only
	 * be WAITING (it needs this one live) or already DEP_FAILED. */
	work = malloc((size_t)(s->n + 1) * sizeof(int));
	if (!work)
		return 0; /* dependents stay WAITING forever; caller detects stall */
	work[nd++] = idx;
	for (head = 0; head < nd; head++) {
		int v = work[head];
		for (k = s->rdoff[v]; k < s->rdoff[v + 1]; k++) {
			int d = s->rd[k];
			if (s->state[d] != SCHED_WAITING)
				continue;
			s->state[d] = SCHED_DEP_FAILED;
			s->cause[d] = idx;
			s->ndone++;
			work[nd++] = d;
		}
	}
	if (depfailed)
		memcpy(depfailed, work + 1, (size_t)(nd - 1) * sizeof(int));
	free(work);
	return nd - 1;
}

int sched_finished(const struct sched *s)
{
	return s->ndone == s->n;
}
