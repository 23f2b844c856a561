/* footprint.c — an idle sandbox's memory. The supervisor and pid 1 run
 * most of libbrig once, during setup, and then sit in a small loop for
 * the rest of the sandbox's life. The pages of code and read-only data
 * setup touched stay mapped and are counted in their PSS; so are the heap
 * pages setup freed. Once the process is idle they are given back. */
#define _GNU_SOURCE
#include "core/footprint.h"

#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <time.h>

/* What may be dropped, in a mapping of /proc/self/smaps: its pages are
 * the file's own (a private read-only mapping nobody wrote: no anonymous
 * page), so MADV_DONTNEED only drops this process's references and the
 * next access faults in the same bytes from the page cache. A writable
 * mapping, a shared one, or one with an anonymous page (data relocated,
 * then made read-only: RELRO) is never touched. */
struct vma {
        unsigned long start, end;
};
#define SHED_MAX 128  /* more mappings than that: the rest stays */

struct shed {
        struct vma drop[SHED_MAX];
        size_t n;
        struct vma stack;
};

BRIG_IDLE_LOOP static void read_smaps(FILE *f, struct shed *sh)
{
        char line[512];
        struct vma v = { 0 };
        bool candidate = false;
        unsigned long anon = 1;
        for (;;) {
                bool more = fgets(line, sizeof line, f) != NULL;
                unsigned long start, end, inode;
                char perms[5];
                int name = 0;
                bool header = more && sscanf(line, "%lx-%lx %4s %*s %*s %lu %n", &start, &end, perms, &inode,
                                             &name) == 4;
                if (!more || header) {
                        if (candidate && anon == 0 && v.end > v.start && sh->n < SHED_MAX)
                                sh->drop[sh->n++] = v;
                        if (!more)
                                return;
                        v = (struct vma){ .start = start, .end = end };
                        candidate = inode != 0 && perms[0] == 'r' && perms[1] == '-' && perms[3] == 'p';
                        anon = 1;  /* unknown until its Anonymous line */
                        if (strncmp(line + name, "[stack]", 7) == 0)
                                sh->stack = v;
                } else if (strncmp(line, "Anonymous:", 10) == 0) {
                        anon = strtoul(line + 10, NULL, 10);
                }
        }
}

/* The main thread's stack below the frames live now: setup's deep calls
 * dirtied it, and by the ABI nothing below the stack pointer (past its
 * 128-byte red zone) is ever read again before it is written. Two pages
 * stay for the calls below this one (madvise itself, a signal handler). */
BRIG_IDLE_LOOP static void drop_stack_below(const struct vma *stack)
{
        const long page = sysconf(_SC_PAGESIZE);
        unsigned long here = (unsigned long)__builtin_frame_address(0);
        if (page <= 0 || here < stack->start || here >= stack->end)
                return;  /* a thread's own stack: not this mapping */
        unsigned long top = (here & ~((unsigned long)page - 1)) - 2 * (unsigned long)page;
        if (top > stack->start)
                (void)madvise((void *)stack->start, top - stack->start, MADV_DONTNEED);
}

BRIG_IDLE_LOOP void footprint_shed(void)
{
        /* smaps, not maps: only it tells whether a mapping holds an
         * anonymous (written) page */
        FILE *f = fopen("/proc/self/smaps", "re");
        struct statfs sfs;
        struct shed sh = { .n = 0 };
        /* pid 1 reads it inside the sandbox: it must be the kernel's
         * account of this process, never a file the command put there */
        if (f && fstatfs(fileno(f), &sfs) == 0 && sfs.f_type == PROC_SUPER_MAGIC)
                read_smaps(f, &sh);
        if (f)
                fclose(f);
        malloc_trim(0);  /* the FILE was malloc's too */
        /* Last, when nothing but this loop runs: what the parse above read
         * (its format strings are brig's read-only data) would fault the
         * pages straight back in. */
        for (size_t i = 0; i < sh.n; i++)
                (void)madvise((void *)sh.drop[i].start, sh.drop[i].end - sh.drop[i].start, MADV_DONTNEED);
        drop_stack_below(&sh.stack);
}

BRIG_IDLE_LOOP static uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

BRIG_IDLE_LOOP int footprint_timeout(struct footprint *fp, int wait_ms)
{
        uint64_t now = now_ms();
        if (!fp->due_ms && !fp->shed)
                fp->due_ms = now + FOOTPRINT_IDLE_MS;  /* setup has just ended */
        if (!fp->due_ms)
                return wait_ms;  /* shed, and nothing happened since */
        int left = fp->due_ms > now ? (int)(fp->due_ms - now) : 0;
        return wait_ms >= 0 && wait_ms < left ? wait_ms : left;
}

BRIG_IDLE_LOOP void footprint_polled(struct footprint *fp, int polled)
{
        uint64_t now = now_ms();
        if (polled > 0) {
                /* busy: not idle yet. After a shed, what this event runs
                 * (a brig exec, a proxied connection) faults code back
                 * in: shed again once it is over. A command can make that
                 * happen at most once per FOOTPRINT_AGAIN_MS. */
                fp->due_ms = now + (fp->shed ? FOOTPRINT_AGAIN_MS : FOOTPRINT_IDLE_MS);
        } else if (polled == 0 && fp->due_ms && now >= fp->due_ms) {
                footprint_shed();
                fp->shed = true;
                fp->due_ms = 0;
        }
}
