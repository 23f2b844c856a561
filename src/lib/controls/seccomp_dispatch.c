/* seccomp_dispatch.c — the number dispatch of the syscall filter: a
 * binary search over ranges of syscall numbers that share one decision,
 * in front of libseccomp's programs for the calls whose decision depends
 * on their arguments (seccomp.c makes them and calls this).
 *
 * Why not libseccomp alone: its rules are per syscall number, and its
 * binary tree (SCMP_FLTATR_CTL_OPTIMIZE 2) still spends a compare and a
 * return on each of them; nothing in its API says "numbers 0 to 40 are
 * allowed". The default profile has 362 calls but only about 90 changes
 * of decision over the numbers, and the kernel's load (its checks, the
 * conversion to eBPF, the JIT, the constant-action cache's emulation) is
 * linear in the instructions: 543 of libseccomp's against about 300 here.
 *
 * The input is the decision table brig built from its own profile and
 * the policy's rules, never bytes from anywhere else: a pure generator,
 * and test_seccomp_decisions.py compares what the kernel holds with the
 * reference for every number, argument boundary and ABI. */
#define _GNU_SOURCE
#include "controls/seccomp_filter.h"

#include <errno.h>
#include <linux/audit.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* The x32 ABI: x86_64's audit arch with this bit in the number. */
#define X32_SYSCALL_BIT 0x40000000U

struct range {
        uint32_t first;  /* numbers first .. the next range's first - 1 */
        uint32_t ret;
        int sub;         /* >= 0: the argument checks' program of that index */
};

struct emit {
        struct sock_filter *p;
        size_t n, cap;
        const struct range *r;
        bool shared;     /* a one-range side jumps to its decision's return at the end */
        struct fixup {
                size_t at;     /* a jump to the return (or argument checks) of range `leaf` */
                size_t leaf;
                bool jt;       /* its jt; else its jf, or a JA's k */
        } *fix;
        size_t n_fix;
        bool failed;
};

static size_t put(struct emit *e, struct sock_filter f)
{
        if (e->n == e->cap) {
                size_t cap = e->cap ? 2 * e->cap : 256;
                struct sock_filter *p = realloc(e->p, cap * sizeof *p);
                if (!p) {
                        e->failed = true;
                        return 0;
                }
                e->p = p;
                e->cap = cap;
        }
        e->p[e->n] = f;
        return e->n++;
}

static void refer(struct emit *e, size_t at, size_t leaf, bool jt)
{
        struct fixup *f = realloc(e->fix, (e->n_fix + 1) * sizeof *f);
        if (!f) {
                e->failed = true;
                return;
        }
        e->fix = f;
        e->fix[e->n_fix++] = (struct fixup){ .at = at, .leaf = leaf, .jt = jt };
}

/* Instructions the ranges lo..hi-1 take (see subtree). */
static size_t tree_size(const struct emit *e, size_t lo, size_t hi)
{
        if (hi - lo == 1)
                return e->shared ? 0 : 1;
        size_t mid = lo + (hi - lo) / 2, left = tree_size(e, lo, mid);
        return 1 + (left > 255) + left + tree_size(e, mid, hi);
}

/* The ranges lo..hi-1, with the number in the accumulator: a JGE on the
 * first number of the upper half (over a JA when the lower half is
 * longer than a conditional jump reaches), the lower half, the upper
 * half. A leaf is a return, or a JA on to the argument checks; shared, a
 * one-range side is no instruction: the node jumps to the return of its
 * decision at the end. */
static void subtree(struct emit *e, size_t lo, size_t hi)
{
        if (e->failed)
                return;
        if (hi - lo == 1) {
                if (e->shared)
                        return;
                if (e->r[lo].sub >= 0)
                        refer(e, put(e, (struct sock_filter)BPF_STMT(BPF_JMP | BPF_JA, 0)), lo, false);
                else
                        put(e, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, e->r[lo].ret));
                return;
        }
        size_t mid = lo + (hi - lo) / 2, left = tree_size(e, lo, mid);
        size_t at = put(e, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, e->r[mid].first, 0, 0));
        size_t ja = at;
        if (e->failed)
                return;
        if (left > 255) {
                e->p[at].jf = 1;
                ja = put(e, (struct sock_filter)BPF_STMT(BPF_JMP | BPF_JA, (uint32_t)left));
        } else
                e->p[at].jt = (uint8_t)left;
        if (e->shared && mid - lo == 1)
                refer(e, at, lo, false);
        subtree(e, lo, mid);
        if (e->shared && hi - mid == 1)
                refer(e, ja, mid, ja == at);
        subtree(e, mid, hi);
}

/* Decisions compare equal: one return serves both. */
static bool same(const struct range *a, const struct range *b)
{
        return a->sub == b->sub && (a->sub >= 0 || a->ret == b->ret);
}

static int emit_all(struct emit *e, uint32_t arch, uint32_t badarch, size_t n_ranges,
                    const struct seccomp_subprog *subs, size_t n_subs)
{
        put(e, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)));
        /* Another ABI (i386's int 0x80 on x86_64): badarch, as libseccomp's. */
        if (arch == AUDIT_ARCH_X86_64) {
                /* x32's numbers share the arch: badarch too, but for -1 (no
                 * call: a tracer's skip), which libseccomp lets through to
                 * the numbers' decisions. */
                put(e, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 0, 3));
                put(e, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
                put(e, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, X32_SYSCALL_BIT, 0, 2));
                put(e, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, UINT32_MAX, 1, 0));
                put(e, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, badarch));
        } else {
                put(e, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 1, 0));
                put(e, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, badarch));
                put(e, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
        }
        subtree(e, 0, n_ranges);
        if (e->failed)
                return -ENOMEM;
        /* The returns the shared sides need, one per decision, and last the
         * argument checks: libseccomp's programs as they were exported
         * (their jumps are relative), each run for the numbers routed to it. */
        size_t *target = calloc(n_ranges, sizeof *target);
        size_t *sub_at = calloc(n_subs ? n_subs : 1, sizeof *sub_at);
        if (!target || !sub_at) {
                free(target);
                free(sub_at);
                return -ENOMEM;
        }
        for (size_t i = 0; i < e->n_fix; i++) {
                size_t leaf = e->fix[i].leaf;
                if (e->r[leaf].sub >= 0 || target[leaf])
                        continue;
                for (size_t j = 0; j < n_ranges && !target[leaf]; j++)
                        if (target[j] && same(&e->r[j], &e->r[leaf]))
                                target[leaf] = target[j];
                if (!target[leaf])
                        target[leaf] = put(e, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, e->r[leaf].ret));
        }
        for (size_t k = 0; k < n_subs; k++) {
                bool needed = false;
                for (size_t i = 0; i < n_ranges; i++)
                        needed |= e->r[i].sub == (int)k;
                sub_at[k] = e->n;
                for (size_t i = 0; needed && i < subs[k].len; i++)
                        put(e, subs[k].prog[i]);
        }
        int r = e->failed ? -ENOMEM : 0;
        for (size_t i = 0; r == 0 && i < e->n_fix; i++) {
                const struct fixup *f = &e->fix[i];
                int k = e->r[f->leaf].sub;
                size_t dist = (k >= 0 ? sub_at[k] : target[f->leaf]) - f->at - 1;
                if (e->p[f->at].code == (BPF_JMP | BPF_JA))
                        e->p[f->at].k = (uint32_t)dist;
                else if (dist > 255)
                        r = -EAGAIN;  /* too far for shared returns: again, each leaf its own */
                else if (f->jt)
                        e->p[f->at].jt = (uint8_t)dist;
                else
                        e->p[f->at].jf = (uint8_t)dist;
        }
        free(target);
        free(sub_at);
        return r;
}

/* Append numbers from `first` on with decision c, merged into the range
 * before when it decides the same. */
static void append(struct range *r, size_t *m, uint32_t first, struct range c)
{
        if (*m && same(&r[*m - 1], &c))
                return;
        c.first = first;
        r[(*m)++] = c;
}

int seccomp_dispatch_emit(uint32_t arch, uint32_t badarch, const struct seccomp_number *v, size_t n, uint32_t dflt,
                          const struct seccomp_subprog *subs, size_t n_subs, struct sock_filter **prog, size_t *len)
{
        *prog = NULL;
        *len = 0;
        for (size_t i = 0; i < n; i++)
                if ((i && v[i].nr <= v[i - 1].nr) || v[i].sub >= (int)n_subs || (v[i].sub >= 0 && !subs[v[i].sub].len))
                        return -EINVAL;  /* sorted, no number twice, each routed to a program */
        /* Ranges over all 2^32 numbers: the default between the named ones. */
        struct range *r = malloc((2 * n + 1) * sizeof *r);
        if (!r)
                return -ENOMEM;
        const struct range other = { .ret = dflt, .sub = -1 };
        size_t m = 0;
        if (n == 0 || v[0].nr > 0)
                append(r, &m, 0, other);
        for (size_t i = 0; i < n; i++) {
                append(r, &m, v[i].nr, (struct range){ .ret = v[i].ret, .sub = v[i].sub });
                if (v[i].nr != UINT32_MAX && (i + 1 == n || v[i + 1].nr > v[i].nr + 1))
                        append(r, &m, v[i].nr + 1, other);
        }
        int ret = -EAGAIN;
        /* Shared returns first; a table too long for them, each leaf its own
         * (a single range is a leaf of its own either way). */
        for (int shared = m > 1; shared >= 0 && ret == -EAGAIN; shared--) {
                struct emit e = { .r = r, .shared = shared };
                ret = emit_all(&e, arch, badarch, m, subs, n_subs);
                if (ret == 0 && e.n > BPF_MAXINSNS)
                        ret = -E2BIG;
                free(e.fix);
                if (ret == 0) {
                        *prog = e.p;
                        *len = e.n;
                } else
                        free(e.p);
        }
        free(r);
        return ret;
}
