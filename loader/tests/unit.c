/* unit.c - unit tests for plan parsing and the scheduler. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "sched.h"

static int npass, nfail;

static void result(int ok, const char *name, const char *fmt, ...)
{
	va_list ap;

	if (ok) {
		printf("ok - %s\n", name);
		npass++;
		return;
	}
	printf("FAIL - %s: ", name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	nfail++;
}

/* modules named "live_*" or "core" count as live in sysfs */
static int fake_live(const char *key, void *ctx)
{
	(void)ctx;
	return strncmp(key, "live_", 5) == 0 || strcmp(key, "core") == 0;
}

static int parse(const char *text, struct bl_plan *p, char *err)
{
	err[0] = 0;
	return plan_parse("plan.txt", text, strlen(text), fake_live, NULL, p, err, 512);
}

/* expect a parse error whose message is exactly want */
static void expect_err(const char *name, const char *text, const char *want)
{
	struct bl_plan p;
	char err[512];
	int rc = parse(text, &p, err);

	result(rc == -1 && strcmp(err, want) == 0, name,
	       "rc=%d err='%s' want='%s'", rc, err, want);
	if (rc == 0)
		plan_free(&p);
}

static void test_plan_good(void)
{
	const char *text =
		"# generated\n"
		"\n"
		"   # indented comment\n"
		"bootlink-plan 1\n"
		"a\t/lib/modules/a.ko   -\n"
		"b /m/b.ko.xz a   foo=1   bar=\"x y\"\t z\n"
		"c-mod /m/c.ko.zst a,b\r\n"
		"d /m/d.ko.gz c_mod,live-one,core  \n"
		"e_x /m/e.ko b,b,a\n";
	struct bl_plan p;
	char err[512];
	int rc = parse(text, &p, err);

	result(rc == 0, "plan: good plan parses", "err=%s", err);
	if (rc)
		return;
	result(p.n == 5, "plan: module count", "n=%d", p.n);
	result(strcmp(p.mods[0].name, "a") == 0 && strcmp(p.mods[0].path, "/lib/modules/a.ko") == 0 &&
	       p.mods[0].ndeps == 0 && p.mods[0].params[0] == 0 && p.mods[0].line == 5,
	       "plan: fields of a tab-separated line", "name=%s path=%s line=%d",
	       p.mods[0].name, p.mods[0].path, p.mods[0].line);
	result(strcmp(p.mods[1].params, "foo=1   bar=\"x y\"\t z") == 0,
	       "plan: params with spaces passed verbatim", "params='%s'", p.mods[1].params);
	result(strcmp(p.mods[2].name, "c-mod") == 0 && strcmp(p.mods[2].key, "c_mod") == 0 &&
	       strcmp(p.mods[2].path, "/m/c.ko.zst") == 0 && p.mods[2].params[0] == 0,
	       "plan: name normalized, CRLF stripped", "key=%s path='%s' params='%s'",
	       p.mods[2].key, p.mods[2].path, p.mods[2].params);
	result(p.mods[3].ndeps == 1 && p.mods[3].deps[0] == 2 && p.mods[3].nxdeps == 2 &&
	       strcmp(p.mods[3].xdeps[0], "live-one") == 0,
	       "plan: '-'/'_' equal in deps, live deps outside the plan accepted",
	       "ndeps=%d nxdeps=%d", p.mods[3].ndeps, p.mods[3].nxdeps);
	result(p.mods[4].ndeps == 2 && p.mods[4].deps[0] == 1 && p.mods[4].deps[1] == 0,
	       "plan: repeated deps collapsed", "ndeps=%d", p.mods[4].ndeps);
	result(plan_find(&p, "c_mod") == 2 && plan_find(&p, "zz") == -1,
	       "plan: find by normalized name", "%d", plan_find(&p, "c_mod"));
	plan_free(&p);
}

static void test_plan_errors(void)
{
	expect_err("plan error: empty file", "",
		   "plan.txt:1: bad header: missing 'bootlink-plan 1' line");
	expect_err("plan error: only comments", "# x\n\n# y\n",
		   "plan.txt:3: bad header: missing 'bootlink-plan 1' line");
	expect_err("plan error: wrong version", "# c\nbootlink-plan 2\n",
		   "plan.txt:2: bad header: expected 'bootlink-plan 1', got 'bootlink-plan 2'");
	expect_err("plan error: module line before header", "a /a.ko -\nbootlink-plan 1\n",
		   "plan.txt:1: bad header: expected 'bootlink-plan 1', got 'a /a.ko -'");
	expect_err("plan error: too few fields", "bootlink-plan 1\na /a.ko -\nb /b.ko\n",
		   "plan.txt:3: malformed line: expected NAME PATH DEPS [PARAMS...]");
	expect_err("plan error: bad name", "bootlink-plan 1\na.b /a.ko -\n",
		   "plan.txt:2: invalid module name 'a.b'");
	expect_err("plan error: name too long",
		   "bootlink-plan 1\naaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa /a.ko -\n",
		   "plan.txt:2: invalid module name 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'");
	expect_err("plan error: relative path", "bootlink-plan 1\na a.ko -\n",
		   "plan.txt:2: module a: path must be absolute: 'a.ko'");
	expect_err("plan error: path suffix", "bootlink-plan 1\na /a.o -\n",
		   "plan.txt:2: module a: path must end in .ko, .ko.xz, .ko.zst or .ko.gz: '/a.o'");
	expect_err("plan error: empty dep", "bootlink-plan 1\na /a.ko -\nb /b.ko a,,a\n",
		   "plan.txt:3: malformed dependency list 'a,,a': empty name");
	expect_err("plan error: bad dep name", "bootlink-plan 1\na /a.ko -\nb /b.ko a,x/y\n",
		   "plan.txt:3: invalid dependency name 'x/y'");
	expect_err("plan error: duplicate", "bootlink-plan 1\na-b /a.ko -\nx /x.ko -\na_b /b.ko -\n",
		   "plan.txt:4: duplicate module name 'a_b' (first defined at line 2 as 'a-b')");
	expect_err("plan error: unknown dep",
		   "bootlink-plan 1\na /a.ko -\nb /b.ko a,ghost\n",
		   "plan.txt:3: module b depends on ghost, which is not in the plan and not loaded");
	expect_err("plan error: self cycle", "bootlink-plan 1\na /a.ko a\n",
		   "plan.txt:2: dependency cycle: a -> a");
	expect_err("plan error: two-module cycle", "bootlink-plan 1\na /a.ko b\nb /b.ko a\n",
		   "plan.txt:2: dependency cycle: a -> b -> a");
	expect_err("plan error: cycle through normalized names",
		   "bootlink-plan 1\na-b /a.ko c\nc /c.ko a_b\n",
		   "plan.txt:2: dependency cycle: a-b -> c -> a-b");
	expect_err("plan error: cycle not at the start",
		   "bootlink-plan 1\nt /t.ko x\nx /x.ko y\ny /y.ko z\nz /z.ko x\n",
		   "plan.txt:3: dependency cycle: x -> y -> z -> x");
	{
		static const char nul[] = "bootlink-plan 1\na /a.ko -\0\n";
		struct bl_plan p;
		char err[512] = "";
		int rc = plan_parse("plan.txt", nul, sizeof(nul) - 1, fake_live, NULL,
				    &p, err, sizeof(err));
		result(rc == -1 && strcmp(err, "plan.txt:2: NUL byte in plan") == 0,
		       "plan error: NUL byte", "rc=%d err='%s'", rc, err);
	}
}

/* build a plan from "name:dep,dep name:- ..." */
static int mkplan(struct bl_plan *p, const char *spec)
{
	char text[4096], *s = strdup(spec), *save = NULL, *tok, err[512];
	size_t off = (size_t)sprintf(text, "bootlink-plan 1\n");
	int rc;

	for (tok = strtok_r(s, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		char *colon = strchr(tok, ':');
		*colon = 0;
		off += (size_t)sprintf(text + off, "%s /m/%s.ko %s\n", tok, tok, colon + 1);
	}
	free(s);
	rc = parse(text, p, err);
	if (rc)
		fprintf(stderr, "mkplan: %s\n", err);
	return rc;
}

static void test_sched_order(void)
{
	struct bl_plan p;
	struct sched s;
	int order[16], n = 0, idx, ok = 1, i, j;
	int live[16] = { 0 };

	/* file order deliberately not topological */
	if (mkplan(&p, "d:b,c b:a c:a a:- e:-") || sched_init(&s, &p)) {
		result(0, "sched: diamond setup", "setup failed");
		return;
	}
	result(sched_nready(&s) == 2, "sched: initially ready = modules without deps",
	       "nready=%d", sched_nready(&s));
	while ((idx = sched_claim(&s)) >= 0) {
		for (j = 0; j < p.mods[idx].ndeps; j++)
			ok &= live[p.mods[idx].deps[j]];
		order[n++] = idx;
		live[idx] = 1;
		sched_complete(&s, idx, 1, NULL);
	}
	result(ok && n == 5 && sched_finished(&s),
	       "sched: diamond, each module after all its deps", "n=%d ok=%d", n, ok);
	{
		char buf[64] = "";
		for (i = 0; i < n; i++)
			strcat(buf, p.mods[order[i]].name);
		result(strcmp(buf, "aebcd") == 0, "sched: FIFO readiness order", "order=%s", buf);
	}
	sched_free(&s);
	plan_free(&p);
}

static void test_sched_partial(void)
{
	struct bl_plan p;
	struct sched s;
	int a, b, x;

	/* c needs a and b; it must not be ready while only a is live */
	if (mkplan(&p, "a:- b:- c:a,b") || sched_init(&s, &p)) {
		result(0, "sched: partial readiness setup", "setup failed");
		return;
	}
	a = sched_claim(&s);
	b = sched_claim(&s);
	x = sched_claim(&s);
	result(a == 0 && b == 1 && x == -1, "sched: nothing else ready before deps complete",
	       "a=%d b=%d x=%d", a, b, x);
	sched_complete(&s, a, 1, NULL);
	x = sched_claim(&s);
	result(x == -1, "sched: module not ready with one of two deps live", "x=%d", x);
	sched_complete(&s, b, 1, NULL);
	x = sched_claim(&s);
	result(x == 2, "sched: module ready the moment its last dep is live", "x=%d", x);
	result(sched_complete(&s, x, 1, NULL) == 0 && sched_complete(&s, x, 1, NULL) == -1 &&
	       sched_complete(&s, 99, 1, NULL) == -1,
	       "sched: completing twice or an unknown module is refused", "");
	result(sched_finished(&s), "sched: finished", "");
	sched_free(&s);
	plan_free(&p);
}

static void test_sched_failure(void)
{
	struct bl_plan p;
	struct sched s;
	int df[16], nd, idx, claimed[16] = { 0 }, twice = 0, loaded = 0;

	/* a fails: b, c (via b), d (diamond via b and f) dep-fail; e, f, g fine */
	if (mkplan(&p, "a:- b:a c:b e:- f:e d:b,f g:f") || sched_init(&s, &p)) {
		result(0, "sched: failure setup", "setup failed");
		return;
	}
	while ((idx = sched_claim(&s)) >= 0) {
		twice |= claimed[idx]++;
		if (idx == 0) {
			nd = sched_complete(&s, idx, 0, df);
			{
				char buf[64] = "";
				int i, causes = 1;
				for (i = 0; i < nd; i++) {
					strcat(buf, p.mods[df[i]].name);
					causes &= s.cause[df[i]] == 0 &&
						  s.state[df[i]] == SCHED_DEP_FAILED;
				}
				result(nd == 3 && strcmp(buf, "bcd") == 0 && causes,
				       "sched: failure propagates transitively (diamond too)",
				       "nd=%d depfailed=%s", nd, buf);
			}
		} else {
			loaded++;
			sched_complete(&s, idx, 1, df);
		}
	}
	result(loaded == 3 && s.state[3] == SCHED_OK && s.state[4] == SCHED_OK &&
	       s.state[6] == SCHED_OK, "sched: failure touches nothing else",
	       "loaded=%d", loaded);
	result(!twice && claimed[1] == 0 && claimed[2] == 0 && claimed[5] == 0,
	       "sched: each module claimed at most once, dep-failed never claimed", "");
	result(sched_finished(&s), "sched: finished after failure", "");
	sched_free(&s);
	plan_free(&p);
}

static void test_sched_big(void)
{
	/* a 2000-deep chain plus fan-out: no recursion limits, all claimed once */
	size_t cap = 1 << 20, off = 0;
	char *text = malloc(cap), err[512];
	struct bl_plan p;
	struct sched s;
	int i, idx, n = 0, *seen;

	off += (size_t)sprintf(text, "bootlink-plan 1\n");
	for (i = 0; i < 2000; i++) {
		if (i == 0)
			off += (size_t)sprintf(text + off, "m0 /m/m0.ko -\n");
		else
			off += (size_t)sprintf(text + off, "m%d /m/m%d.ko m%d,m%d\n", i, i,
					       i - 1, i / 2);
	}
	if (plan_parse("big", text, off, NULL, NULL, &p, err, sizeof(err)) ||
	    sched_init(&s, &p)) {
		result(0, "sched: 2000-module chain", "%s", err);
		free(text);
		return;
	}
	seen = calloc(2000, sizeof(int));
	while ((idx = sched_claim(&s)) >= 0) {
		seen[idx]++;
		n++;
		sched_complete(&s, idx, 1, NULL);
	}
	for (i = 0; i < 2000; i++)
		if (seen[i] != 1)
			break;
	result(n == 2000 && i == 2000 && sched_finished(&s),
	       "sched: 2000-module chain, each claimed once", "n=%d", n);
	/* the same chain closed into a loop is a cycle, found iteratively */
	off += (size_t)sprintf(text + off, "m2000x /m/x.ko m1999\n");
	text[strlen("bootlink-plan 1\nm0 /m/m0.ko ")] = 'q';
	{
		struct bl_plan q;
		char *t2 = malloc(off + 64);
		int rc;
		/* replace "m0 /m/m0.ko -" with a dep on the last module */
		size_t hdr = strlen("bootlink-plan 1\n");
		size_t l0 = strlen("m0 /m/m0.ko q\n");
		size_t o2 = (size_t)sprintf(t2, "bootlink-plan 1\nm0 /m/m0.ko m2000x\n");
		memcpy(t2 + o2, text + hdr + l0, off - hdr - l0);
		o2 += off - hdr - l0;
		rc = plan_parse("big", t2, o2, NULL, NULL, &q, err, sizeof(err));
		result(rc == -1 && strstr(err, "big:2: dependency cycle: m0 -> m2000x -> m1999 -> ") &&
		       strstr(err, " -> ... (1990 more) ... -> ") &&
		       strstr(err, " -> m1 -> m0") != NULL && strlen(err) < 200,
		       "plan: cycle through 2000 modules named", "err=%.120s", err);
		if (rc == 0)
			plan_free(&q);
		free(t2);
	}
	free(seen);
	free(text);
	sched_free(&s);
	plan_free(&p);
}

int main(void)
{
	test_plan_good();
	test_plan_errors();
	test_sched_order();
	test_sched_partial();
	test_sched_failure();
	test_sched_big();
	printf("%d passed, %d failed\n", npass, nfail);
	return nfail ? 1 : 0;
}
