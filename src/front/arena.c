/* arena.c — the front end's allocator, in its musl build (meson.build).
 *
 * The front end lives for one call: it allocates a few kilobytes (the
 * request, a path or two) and exits or execs the engine. musl's malloc
 * gives a block of these sizes its own mmap and, when it is freed, its
 * munmap at once: three of each per brig exec, and an munmap's TLB
 * shootdown interrupts the other CPU, where the supervisor serves that
 * very exec (2.6% of an exec's CPU, perf). Here every block comes from one
 * static arena, in order: a free gives back only the newest block (a
 * temporary freed at once), the rest goes with the process. What does
 * not fit the arena is mapped and unmapped by itself, as before.
 *
 * musl lets a program replace malloc, calloc, realloc and free: what it
 * allocates for its caller (strdup, getline, fopen's buffer) comes from
 * these then, and what it allocates for itself (time zones, locales,
 * atexit, posix_spawn's file actions) from its own __libc_malloc, which
 * it gives back with its own __libc_free, never with ours. The aligned
 * ones are here too, so that no block of musl's allocator reaches our
 * free. Single-threaded, as the front end is. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define ARENA_SIZE (512 * 1024)  /* the largest exec request (128 KiB) fits with room to spare */
#define ALIGN 16

/* Before each block: its size, and whether it was mapped by itself. */
struct block {
        size_t size;
        size_t mapped;  /* the mapping's length, 0 when in the arena */
};
_Static_assert(sizeof(struct block) == ALIGN, "a block's header keeps the next block aligned");

static alignas(ALIGN) unsigned char arena[ARENA_SIZE];
static size_t used;

static size_t round_up(size_t n, size_t a)
{
        return (n + a - 1) / a * a;
}

static struct block *header(void *p)
{
        return (struct block *)p - 1;
}

static void *block_new(size_t size, size_t align)
{
        if (size > SIZE_MAX / 2 || align > 4096) {
                errno = ENOMEM;
                return NULL;
        }
        /* the header just before an address aligned as asked (the
         * address's, not the offset's: the arena is aligned to ALIGN only) */
        uintptr_t base = (uintptr_t)arena;
        size_t at = (size_t)(round_up(base + used + sizeof(struct block), align) - base);
        size_t end = round_up(at + size, ALIGN);
        if (end <= ARENA_SIZE) {
                struct block *b = (struct block *)(arena + at) - 1;
                *b = (struct block){ .size = size, .mapped = 0 };
                used = end;
                return arena + at;
        }
        size_t len = round_up(size + 4096, 4096);  /* a page for the header keeps any alignment up to a page */
        unsigned char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
                errno = ENOMEM;
                return NULL;
        }
        struct block *b = (struct block *)(m + 4096) - 1;
        *b = (struct block){ .size = size, .mapped = len };
        return m + 4096;
}

void *malloc(size_t size)
{
        return block_new(size, ALIGN);
}

void free(void *p)
{
        if (!p)
                return;
        struct block *b = header(p);
        if (b->mapped) {
                munmap((unsigned char *)p - 4096, b->mapped);
                return;
        }
        /* the newest block: its room is the next one's */
        if ((unsigned char *)p + round_up(b->size, ALIGN) == arena + used)
                used = (size_t)((unsigned char *)b - arena);
}

void *calloc(size_t n, size_t size)
{
        if (size && n > SIZE_MAX / size) {
                errno = ENOMEM;
                return NULL;
        }
        /* the arena is zero where no block has been; a reused or mapped
         * block is cleared all the same */
        void *p = malloc(n * size);
        if (p)
                memset(p, 0, n * size);
        return p;
}

void *realloc(void *p, size_t size)
{
        if (!p)
                return malloc(size);
        if (size > SIZE_MAX / 2) {  /* as block_new: no rounding below may wrap */
                errno = ENOMEM;
                return NULL;
        }
        struct block *b = header(p);
        /* the newest block grows in place when the arena has the room */
        if (!b->mapped && (unsigned char *)p + round_up(b->size, ALIGN) == arena + used &&
            (size_t)((unsigned char *)p - arena) + round_up(size, ALIGN) <= ARENA_SIZE) {
                used = (size_t)((unsigned char *)p - arena) + round_up(size, ALIGN);
                b->size = size;
                return p;
        }
        void *q = malloc(size);
        if (!q)
                return NULL;
        memcpy(q, p, b->size < size ? b->size : size);
        free(p);
        return q;
}

void *aligned_alloc(size_t align, size_t size)
{
        if (!align || (align & (align - 1))) {
                errno = EINVAL;
                return NULL;
        }
        return block_new(size, align < ALIGN ? ALIGN : align);
}

void *memalign(size_t align, size_t size)
{
        return aligned_alloc(align, size);
}

int posix_memalign(void **out, size_t align, size_t size)
{
        if (align < sizeof(void *) || (align & (align - 1)))
                return EINVAL;
        void *p = aligned_alloc(align, size);
        if (!p)
                return ENOMEM;
        *out = p;
        return 0;
}

size_t malloc_usable_size(void *p)
{
        return p ? header(p)->size : 0;
}
