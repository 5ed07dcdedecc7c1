/* plan.c - parse and validate a bootlink module plan. */
#define _GNU_SOURCE
#include "plan.h"
#include "readall.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PLAN_HEADER "bootlink-plan 1"
#define PLAN_MAX_BYTES (64u << 20)
#define PLAN_MAX_MODULES 100000

static int plan_err(char *err, size_t errlen, const char *fname, int line,
		    const char *fmt, ...)
{
	va_list ap;
	size_t off;

	if (!err || !errlen)
		return -1;
	if (line > 0)
		snprintf(err, errlen, "%s:%d: ", fname, line);
	else
		snprintf(err, errlen, "%s: ", fname);
	off = strlen(err);
	va_start(ap, fmt);
	if (off < errlen)
		vsnprintf(err + off, errlen - off, fmt, ap);
	va_end(ap);
	return -1;
}

void plan_normalize(char *dst, const char *src)
{
	for (; *src; src++, dst++)
		*dst = *src == '-' ? '_' : *src;
	*dst = 0;
}

int plan_valid_name(const char *s, size_t len)
{
	size_t i;

	if (len == 0 || len > BL_NAME_MAX)
		return 0;
	for (i = 0; i < len; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

int plan_find(const struct bl_plan *p, const char *key)
{
	int i;

	for (i = 0; i < p->n; i++)
		if (strcmp(p->mods[i].key, key) == 0)
			return i;
	return -1;
}

void plan_free(struct bl_plan *p)
{
	int i, j;

	if (!p || !p->mods)
		return;
	for (i = 0; i < p->n; i++) {
		struct bl_mod *m = &p->mods[i];
		free(m->name);
		free(m->key);
		free(m->path);
		free(m->params);
		free(m->deps);
		for (j = 0; j < m->nxdeps; j++)
			free(m->xdeps[j]);
		free(m->xdeps);
	}
	free(p->mods);
	p->mods = NULL;
	p->n = 0;
}

/* ---- a small open-addressing table: normalized name -> module index ---- */

struct ntab {
	size_t cap;   /* power of two */
	int *slot;    /* module index, -1 empty */
	const struct bl_mod *mods;
};

static uint32_t hash_str(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

static int ntab_init(struct ntab *t, size_t n)
{
	size_t i;

	t->cap = 16;
	while (t->cap < n * 2 + 1)
		t->cap <<= 1;
	t->slot = malloc(t->cap * sizeof(*t->slot));
	if (!t->slot)
		return -1;
	for (i = 0; i < t->cap; i++)
		t->slot[i] = -1;
	return 0;
}

/* Returns the existing index for key, or inserts idx and returns -1. */
static int ntab_put(struct ntab *t, const char *key, int idx)
{
	size_t i = hash_str(key) & (t->cap - 1);

	while (t->slot[i] >= 0) {
		if (strcmp(t->mods[t->slot[i]].key, key) == 0)
			return t->slot[i];
		i = (i + 1) & (t->cap - 1);
	}
	if (idx >= 0)
		t->slot[i] = idx;
	return -1;
}

static int ntab_get(struct ntab *t, const char *key)
{
	return ntab_put(t, key, -1);
}

/* ---- line parsing ---- */

static int is_ws(char c)
{
	return c == ' ' || c == '\t';
}

static char *xstrndup(const char *s, size_t n)
{
	char *d = malloc(n + 1);

	if (d) {
		memcpy(d, s, n);
		d[n] = 0;
	}
	return d;
}

static int path_suffix_ok(const char *p, size_t len)
{
	static const char *const sfx[] = { ".ko", ".ko.xz", ".ko.zst", ".ko.gz" };
	size_t i;

	for (i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++) {
		size_t l = strlen(sfx[i]);
		if (len > l && memcmp(p + len - l, sfx[i], l) == 0 &&
		    p[len - l - 1] != '/')
			return 1;
	}
	return 0;
}

/* raw dependency names of one line, kept until all modules are known */
struct rawdeps {
	int n;
	char **names;
};

static int parse_deps(const char *s, size_t len, struct rawdeps *rd,
		      const char *fname, int line, char *err, size_t errlen)
{
	size_t i = 0;

	rd->n = 0;
	rd->names = NULL;
	if (len == 1 && s[0] == '-')
		return 0;
	while (i <= len) {
		size_t j = i;
		char **nn;
		while (j < len && s[j] != ',')
			j++;
		if (j == i)
			return plan_err(err, errlen, fname, line,
					"malformed dependency list '%.*s': empty name",
					(int)len, s);
		if (!plan_valid_name(s + i, j - i))
			return plan_err(err, errlen, fname, line,
					"invalid dependency name '%.*s'",
					(int)(j - i), s + i);
		nn = realloc(rd->names, (rd->n + 1) * sizeof(*nn));
		if (!nn)
			return plan_err(err, errlen, fname, line, "out of memory");
		rd->names = nn;
		rd->names[rd->n] = xstrndup(s + i, j - i);
		if (!rd->names[rd->n])
			return plan_err(err, errlen, fname, line, "out of memory");
		rd->n++;
		i = j + 1;
	}
	return 0;
}

static void rawdeps_free(struct rawdeps *rd, int n)
{
	int i, j;

	if (!rd)
		return;
	for (i = 0; i < n; i++) {
		for (j = 0; j < rd[i].n; j++)
			free(rd[i].names[j]);
		free(rd[i].names);
	}
	free(rd);
}

/* ---- cycle detection: iterative DFS (plans may hold long chains) ---- */

static int find_cycle(const struct bl_plan *p, const char *fname,
		      char *err, size_t errlen)
{
	int n = p->n, i, rc = 0;
	size_t sz = (size_t)(n > 0 ? n : 1);
	unsigned char *color = calloc(sz, 1); /* 0 white 1 gray 2 black */
	int *stk = malloc(sz * sizeof(int));
	int *pos = malloc(sz * sizeof(int));

	if (!color || !stk || !pos) {
		rc = plan_err(err, errlen, fname, 0, "out of memory");
		goto out;
	}
	for (i = 0; i < n && rc == 0; i++) {
		int sp = 0;
		if (color[i])
			continue;
		stk[sp] = i;
		pos[sp++] = 0;
		color[i] = 1;
		while (sp > 0) {
			int v = stk[sp - 1];
			const struct bl_mod *m = &p->mods[v];
			int w, k;
			if (pos[sp - 1] >= m->ndeps) {
				color[v] = 2;
				sp--;
				continue;
			}
			w = m->deps[pos[sp - 1]++];
			if (color[w] == 2)
				continue;
			if (color[w] == 0) {
				color[w] = 1;
				stk[sp] = w;
				pos[sp++] = 0;
				continue;
			}
			/* back edge: w is on the stack */
			for (k = sp - 1; k >= 0 && stk[k] != w; k--)
				;
			{
				size_t cap = 64, off = 0;
				char *msg = malloc(cap);
				int q;
				if (!msg) {
					rc = plan_err(err, errlen, fname, 0, "out of memory");
					goto out;
				}
				msg[0] = 0;
				for (q = k; q <= sp; q++) {
					/* long cycles: first and last few names only */
					const char *nm = p->mods[q < sp ? stk[q] : w].name;
					int len = sp - k + 1, elide = 0;
					size_t need;
					if (len > 12 && q - k >= 6 && sp - q >= 6) {
						if (q - k > 6)
							continue;
						nm = "...";
						elide = 1;
					}
					need = off + strlen(nm) + 40;
					if (need > cap) {
						char *nmsg;
						while (cap < need)
							cap *= 2;
						nmsg = realloc(msg, cap);
						if (!nmsg) {
							free(msg);
							rc = plan_err(err, errlen, fname, 0, "out of memory");
							goto out;
						}
						msg = nmsg;
					}
					if (elide)
						off += sprintf(msg + off, " -> ... (%d more) ...",
							       len - 12);
					else
						off += sprintf(msg + off, "%s%s", q > k ? " -> " : "", nm);
				}
				rc = plan_err(err, errlen, fname, p->mods[w].line,
					      "dependency cycle: %s", msg);
				free(msg);
			}
			break;
		}
	}
out:
	free(color);
	free(stk);
	free(pos);
	return rc;
}

int plan_parse(const char *fname, const char *buf, size_t len,
	       bl_live_fn live, void *ctx, struct bl_plan *out,
	       char *err, size_t errlen)
{
	struct bl_plan p = { 0, NULL };
	struct rawdeps *raw = NULL;
	struct ntab tab = { 0, NULL, NULL };
	size_t off = 0, nlines = 0, cap = 0, i;
	int line = 0, have_header = 0, rc = -1, k;

	out->n = 0;
	out->mods = NULL;
	if (memchr(buf, 0, len)) {
		const char *z = memchr(buf, 0, len);
		for (i = 0, line = 1; buf + i < z; i++)
			line += buf[i] == '\n';
		return plan_err(err, errlen, fname, line, "NUL byte in plan");
	}
	for (i = 0; i < len; i++)
		nlines += buf[i] == '\n';

	while (off < len) {
		const char *l = buf + off, *nl = memchr(l, '\n', len - off);
		size_t ll = nl ? (size_t)(nl - l) : len - off;
		size_t a, b;
		const char *f[3];
		size_t fl[3];
		int nf;
		struct bl_mod *m;

		off += ll + (nl ? 1 : 0);
		line++;
		if (ll && l[ll - 1] == '\r')
			ll--;
		for (a = 0; a < ll && is_ws(l[a]); a++)
			;
		if (a == ll || l[a] == '#')
			continue;
		if (!have_header) {
			size_t e = ll;
			while (e > a && is_ws(l[e - 1]))
				e--;
			if (a != 0 || e != strlen(PLAN_HEADER) ||
			    memcmp(l, PLAN_HEADER, e) != 0) {
				plan_err(err, errlen, fname, line,
					 "bad header: expected '" PLAN_HEADER "', got '%.*s'",
					 (int)(ll > 80 ? 80 : ll), l);
				goto fail;
			}
			have_header = 1;
			continue;
		}
		/* NAME PATH DEPS [PARAMS...] */
		b = a;
		for (nf = 0; nf < 3; nf++) {
			while (b < ll && is_ws(l[b]))
				b++;
			if (b == ll)
				break;
			f[nf] = l + b;
			while (b < ll && !is_ws(l[b]))
				b++;
			fl[nf] = (size_t)(l + b - f[nf]);
		}
		if (nf < 3) {
			plan_err(err, errlen, fname, line,
				 "malformed line: expected NAME PATH DEPS [PARAMS...]");
			goto fail;
		}
		while (b < ll && is_ws(l[b]))
			b++;
		if (!plan_valid_name(f[0], fl[0])) {
			plan_err(err, errlen, fname, line,
				 "invalid module name '%.*s'", (int)fl[0], f[0]);
			goto fail;
		}
		if (f[1][0] != '/' || fl[1] >= PATH_MAX) {
			plan_err(err, errlen, fname, line,
				 "module %.*s: path must be absolute: '%.*s'",
				 (int)fl[0], f[0], (int)fl[1], f[1]);
			goto fail;
		}
		if (!path_suffix_ok(f[1], fl[1])) {
			plan_err(err, errlen, fname, line,
				 "module %.*s: path must end in .ko, .ko.xz, .ko.zst or .ko.gz: '%.*s'",
				 (int)fl[0], f[0], (int)fl[1], f[1]);
			goto fail;
		}
		if (p.n >= PLAN_MAX_MODULES) {
			plan_err(err, errlen, fname, line, "too many modules (limit %d)",
				 PLAN_MAX_MODULES);
			goto fail;
		}
		if ((size_t)p.n == cap) {
			size_t nc = cap ? cap * 2 : 64;
			struct bl_mod *nm = realloc(p.mods, nc * sizeof(*nm));
			struct rawdeps *nr;
			if (!nm)
				goto oom;
			p.mods = nm;
			nr = realloc(raw, nc * sizeof(*nr));
			if (!nr)
				goto oom;
			raw = nr;
			cap = nc;
		}
		m = &p.mods[p.n];
		memset(m, 0, sizeof(*m));
		raw[p.n].n = 0;
		raw[p.n].names = NULL;
		p.n++;
		m->line = line;
		m->name = xstrndup(f[0], fl[0]);
		m->key = xstrndup(f[0], fl[0]);
		m->path = xstrndup(f[1], fl[1]);
		m->params = xstrndup(l + b, ll - b);
		if (!m->name || !m->key || !m->path || !m->params)
			goto oom;
		plan_normalize(m->key, m->name);
		if (parse_deps(f[2], fl[2], &raw[p.n - 1], fname, line, err, errlen))
			goto fail;
	}
	if (!have_header) {
		plan_err(err, errlen, fname, (int)(nlines ? nlines : 1),
			 "bad header: missing '" PLAN_HEADER "' line");
		goto fail;
	}

	/* duplicates */
	tab.mods = p.mods;
	if (ntab_init(&tab, (size_t)p.n))
		goto oom;
	for (k = 0; k < p.n; k++) {
		int prev = ntab_put(&tab, p.mods[k].key, k);
		if (prev >= 0) {
			plan_err(err, errlen, fname, p.mods[k].line,
				 "duplicate module name '%s' (first defined at line %d as '%s')",
				 p.mods[k].name, p.mods[prev].line, p.mods[prev].name);
			goto fail;
		}
	}

	/* resolve dependencies */
	for (k = 0; k < p.n; k++) {
		struct bl_mod *m = &p.mods[k];
		int j;
		if (raw[k].n) {
			m->deps = malloc(raw[k].n * sizeof(int));
			m->xdeps = malloc(raw[k].n * sizeof(char *));
			if (!m->deps || !m->xdeps)
				goto oom;
		}
		for (j = 0; j < raw[k].n; j++) {
			char key[BL_NAME_MAX + 1];
			int d, q, dup = 0;
			plan_normalize(key, raw[k].names[j]);
			d = ntab_get(&tab, key);
			if (d == k) {
				plan_err(err, errlen, fname, m->line,
					 "dependency cycle: %s -> %s", m->name, m->name);
				goto fail;
			}
			if (d >= 0) {
				for (q = 0; q < m->ndeps; q++)
					dup |= m->deps[q] == d;
				if (!dup)
					m->deps[m->ndeps++] = d;
				continue;
			}
			for (q = 0; q < m->nxdeps; q++) {
				char k2[BL_NAME_MAX + 1];
				plan_normalize(k2, m->xdeps[q]);
				dup |= strcmp(k2, key) == 0;
			}
			if (dup)
				continue;
			if (!live || !live(key, ctx)) {
				plan_err(err, errlen, fname, m->line,
					 "module %s depends on %s, which is not in the plan and not loaded",
					 m->name, raw[k].names[j]);
				goto fail;
			}
			m->xdeps[m->nxdeps] = raw[k].names[j];
			raw[k].names[j] = NULL;
			m->nxdeps++;
		}
	}

	if (find_cycle(&p, fname, err, errlen))
		goto fail;

	*out = p;
	p.mods = NULL;
	p.n = 0;
	rc = 0;
	goto done;
oom:
	plan_err(err, errlen, fname, line, "out of memory");
fail:
	rc = -1;
done:
	rawdeps_free(raw, p.n ? p.n : (out->mods ? out->n : 0));
	free(tab.slot);
	plan_free(&p);
	return rc;
}

int plan_load(const char *fname, bl_live_fn live, void *ctx,
	      struct bl_plan *out, char *err, size_t errlen)
{
	int fd = open(fname, O_RDONLY | O_CLOEXEC);
	char *buf = NULL;
	size_t len = 0;
	int rc, e;

	out->n = 0;
	out->mods = NULL;
	if (fd < 0)
		return plan_err(err, errlen, fname, 0, "cannot open plan: %s",
				strerror(errno));
	e = bl_read_all(fd, PLAN_MAX_BYTES, &buf, &len);
	if (e) {
		close(fd);
		if (e == EFBIG)
			return plan_err(err, errlen, fname, 0,
					"plan larger than %u bytes", PLAN_MAX_BYTES);
		return plan_err(err, errlen, fname, 0, "cannot read plan: %s",
				strerror(e));
	}
	close(fd);
	rc = plan_parse(fname, buf ? buf : "", len, live, ctx, out, err, errlen);
	free(buf);
	return rc;
}
