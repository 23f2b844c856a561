/* seccomp_cache.c — the bytes of a compiled-filter cache file (seccomp.c
 * reads and writes the file, in the private state root): u32 key length,
 * the key, then classic BPF instructions. Pure functions, fuzzed
 * (tests/fuzz/fuzz_seccomp_cache.c): the file is only as trustworthy as
 * the state root, so its program is run on a few calls every policy
 * refuses before it is loaded. */
#define _GNU_SOURCE
#include "controls/seccomp_filter.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Classic BPF as the kernel runs it for seccomp, on one seccomp_data:
 * forward jumps only, so it ends within n steps. false for what the
 * kernel would refuse to load or could not run (an unknown instruction, a
 * jump or load out of bounds, falling off the end). */
bool seccomp_bpf_eval(const struct sock_filter *prog, size_t n, const struct seccomp_data *sd, uint32_t *ret)
{
        uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = { 0 };
        for (size_t pc = 0; pc < n; pc++) {
                const struct sock_filter *f = &prog[pc];
                uint32_t k = f->k, src = BPF_SRC(f->code) == BPF_X ? x : k;
                size_t jt = pc + f->jt, jf = pc + f->jf;
                switch (BPF_CLASS(f->code)) {
                case BPF_LD:
                        if (f->code == (BPF_LD | BPF_W | BPF_ABS) && k % 4 == 0 && k < sizeof *sd)
                                memcpy(&a, (const char *)sd + k, 4);
                        else if (f->code == (BPF_LD | BPF_IMM))
                                a = k;
                        else if (f->code == (BPF_LD | BPF_MEM) && k < BPF_MEMWORDS)
                                a = mem[k];
                        else if (f->code == (BPF_LD | BPF_W | BPF_LEN))
                                a = sizeof *sd;
                        else
                                return false;
                        break;
                case BPF_LDX:
                        if (f->code == (BPF_LDX | BPF_IMM))
                                x = k;
                        else if (f->code == (BPF_LDX | BPF_MEM) && k < BPF_MEMWORDS)
                                x = mem[k];
                        else if (f->code == (BPF_LDX | BPF_W | BPF_LEN))
                                x = sizeof *sd;
                        else
                                return false;
                        break;
                case BPF_ST:
                case BPF_STX:
                        if (k >= BPF_MEMWORDS)
                                return false;
                        mem[k] = BPF_CLASS(f->code) == BPF_ST ? a : x;
                        break;
                case BPF_ALU:
                        switch (BPF_OP(f->code)) {
                        case BPF_ADD: a += src; break;
                        case BPF_SUB: a -= src; break;
                        case BPF_MUL: a *= src; break;
                        case BPF_DIV: if (!src) return false; a /= src; break;
                        case BPF_MOD: if (!src) return false; a %= src; break;
                        case BPF_AND: a &= src; break;
                        case BPF_OR: a |= src; break;
                        case BPF_XOR: a ^= src; break;
                        case BPF_LSH: a = src < 32 ? a << src : 0; break;
                        case BPF_RSH: a = src < 32 ? a >> src : 0; break;
                        case BPF_NEG: a = -a; break;
                        default: return false;
                        }
                        break;
                case BPF_JMP:
                        switch (BPF_OP(f->code)) {
                        case BPF_JA: jt = jf = pc + k; break;
                        case BPF_JEQ: if (a != src) jt = jf; break;
                        case BPF_JGT: if (!(a > src)) jt = jf; break;
                        case BPF_JGE: if (!(a >= src)) jt = jf; break;
                        case BPF_JSET: if (!(a & src)) jt = jf; break;
                        default: return false;
                        }
                        if (jt >= n - 1 || jt < pc)
                                return false;
                        pc = jt;
                        break;
                case BPF_RET:
                        *ret = BPF_RVAL(f->code) == BPF_A ? a : k;
                        return BPF_RVAL(f->code) == BPF_A || BPF_RVAL(f->code) == BPF_K;
                case BPF_MISC:
                        if (BPF_MISCOP(f->code) == BPF_TAX)
                                x = a;
                        else
                                a = x;
                        break;
                default:
                        return false;
                }
        }
        return false;  /* ran off the end: the kernel would not load it */
}


int seccomp_cache_parse(const void *buf, size_t size, const char *key, size_t len, const struct seccomp_probe *probes,
                        size_t n_probes, bool notifies, struct sock_filter **prog, size_t *n)
{
        *prog = NULL;
        *n = 0;
        uint32_t klen;
        if (size < sizeof klen)
                return -EBADMSG;
        memcpy(&klen, buf, sizeof klen);
        size_t rest = size - sizeof klen;
        const char *p = (const char *)buf + sizeof klen;
        if (klen != len || rest < len || memcmp(p, key, len) != 0)
                return -EBADMSG;  /* another key: another build, profile or rule set */
        rest -= len;
        if (rest == 0 || rest % sizeof(struct sock_filter) != 0 || rest / sizeof(struct sock_filter) > BPF_MAXINSNS)
                return -EBADMSG;
        /* a copy: the instructions need not be aligned in buf */
        struct sock_filter *f = malloc(rest);
        if (!f)
                return -ENOMEM;
        memcpy(f, p + len, rest);
        size_t count = rest / sizeof *f;
        /* A program that allows a call every policy refuses (a file someone
         * rewrote with the right key: the key is no secret) is not loaded.
         * Refusals the supervisor answers (its replies come from the
         * decision table, never from the file) notify. */
        for (size_t i = 0; i < n_probes; i++) {
                struct seccomp_data sd = { .nr = probes[i].nr, .arch = probes[i].arch };
                uint32_t ret, act;
                if (!seccomp_bpf_eval(f, count, &sd, &ret)) {
                        free(f);
                        return -EBADMSG;
                }
                act = ret & SECCOMP_RET_ACTION_FULL;
                if (act != SECCOMP_RET_KILL_PROCESS && act != SECCOMP_RET_KILL_THREAD && act != SECCOMP_RET_TRAP &&
                    act != SECCOMP_RET_ERRNO && !(notifies && act == SECCOMP_RET_USER_NOTIF)) {
                        free(f);
                        return -EPERM;
                }
        }
        *prog = f;
        *n = count;
        return 0;
}
