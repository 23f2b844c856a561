/* test_front_arena.c — unit tests for the front end's allocator
 * (src/front/arena.c), under names of its own so that this program keeps
 * its C library's malloc: blocks aligned and apart, the newest one given
 * back and grown in place, a block too large for the arena mapped and
 * unmapped by itself, contents kept across realloc, and the errors. */
#define _GNU_SOURCE
#define malloc arena_malloc
#define free arena_free
#define calloc arena_calloc
#define realloc arena_realloc
#define aligned_alloc arena_aligned_alloc
#define memalign arena_memalign
#define posix_memalign arena_posix_memalign
#define malloc_usable_size arena_malloc_usable_size
#include "../../src/front/arena.c"
#undef malloc
#undef free
#undef calloc
#undef realloc
#undef aligned_alloc
#undef memalign
#undef posix_memalign
#undef malloc_usable_size

#include <stdarg.h>
#include <stdbool.h>
#include <setjmp.h>
#include <cmocka.h>

static bool in_arena(const void *p)
{
        return (const unsigned char *)p >= arena && (const unsigned char *)p < arena + ARENA_SIZE;
}

static void test_blocks_are_aligned_and_apart(void **state)
{
        (void)state;
        unsigned char *a = arena_malloc(1), *b = arena_malloc(100), *c = arena_malloc(0);
        assert_non_null(a);
        assert_non_null(b);
        assert_non_null(c);
        assert_true(in_arena(a) && in_arena(b) && in_arena(c));
        assert_int_equal((uintptr_t)a % ALIGN, 0);
        assert_int_equal((uintptr_t)b % ALIGN, 0);
        assert_true(b >= a + 1 + sizeof(struct block));  /* a's byte and b's header between them */
        assert_true(c >= b + 100 + sizeof(struct block));
        memset(a, 0xaa, 1);
        memset(b, 0xbb, 100);
        assert_int_equal(a[0], 0xaa);  /* b's writes stayed in b */
        assert_int_equal(arena_malloc_usable_size(b), 100);
        void *big = arena_aligned_alloc(256, 10);
        assert_non_null(big);
        assert_int_equal((uintptr_t)big % 256, 0);
        assert_null(arena_aligned_alloc(3, 8));  /* not a power of two */
        assert_int_equal(errno, EINVAL);
        void *p = NULL;
        assert_int_equal(arena_posix_memalign(&p, 64, 32), 0);
        assert_int_equal((uintptr_t)p % 64, 0);
        assert_int_equal(arena_posix_memalign(&p, 2, 32), EINVAL);  /* below sizeof(void *) */
}

static void test_the_newest_block_is_given_back(void **state)
{
        (void)state;
        unsigned char *a = arena_malloc(64);
        size_t at = used;
        unsigned char *b = arena_malloc(4000);
        assert_true(used > at);
        arena_free(b);
        assert_int_equal(used, at);  /* its room is the next block's */
        unsigned char *c = arena_malloc(10);
        assert_ptr_equal(c, b);
        /* an older block's free gives nothing back, and breaks nothing */
        size_t now = used;
        arena_free(a);
        assert_int_equal(used, now);
        arena_free(NULL);
}

static void test_realloc_keeps_the_contents(void **state)
{
        (void)state;
        char *a = arena_malloc(8);
        memcpy(a, "1234567", 8);
        char *grown = arena_realloc(a, 5000);  /* the newest: in place */
        assert_ptr_equal(grown, a);
        assert_string_equal(grown, "1234567");
        char *other = arena_malloc(16);
        char *moved = arena_realloc(grown, 6000);  /* not the newest any more: copied */
        assert_non_null(moved);
        assert_ptr_not_equal(moved, grown);
        assert_string_equal(moved, "1234567");
        assert_non_null(other);
        char *fresh = arena_realloc(NULL, 3);
        assert_non_null(fresh);
        /* the newest block asked to grow past any size: refused, the arena
         * and the block as they were */
        size_t at = used;
        errno = 0;
        assert_null(arena_realloc(fresh, SIZE_MAX));
        assert_int_equal(errno, ENOMEM);
        assert_null(arena_realloc(fresh, SIZE_MAX - 4096));
        assert_int_equal(used, at);
        assert_int_equal(arena_malloc_usable_size(fresh), 3);
}

static void test_calloc_clears_and_checks_overflow(void **state)
{
        (void)state;
        unsigned char *a = arena_malloc(256);
        memset(a, 0xff, 256);
        arena_free(a);  /* the newest: the next block reuses its bytes */
        unsigned char *z = arena_calloc(16, 16);
        assert_ptr_equal(z, a);
        for (int i = 0; i < 256; i++)
                assert_int_equal(z[i], 0);
        errno = 0;
        assert_null(arena_calloc(SIZE_MAX / 2, 4));
        assert_int_equal(errno, ENOMEM);
}

static void test_what_does_not_fit_is_mapped(void **state)
{
        (void)state;
        size_t before = used;
        unsigned char *big = arena_malloc(ARENA_SIZE);
        assert_non_null(big);
        assert_false(in_arena(big));
        assert_int_equal(used, before);
        assert_int_equal((uintptr_t)big % 4096, 0);
        memset(big, 1, ARENA_SIZE);
        assert_int_equal(arena_malloc_usable_size(big), ARENA_SIZE);
        unsigned char *moved = arena_realloc(big, ARENA_SIZE * 2);  /* mapped to mapped, contents kept */
        assert_non_null(moved);
        assert_int_equal(moved[ARENA_SIZE - 1], 1);
        arena_free(moved);
        errno = 0;
        assert_null(arena_malloc(SIZE_MAX - 8));
        assert_int_equal(errno, ENOMEM);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_blocks_are_aligned_and_apart),
                cmocka_unit_test(test_the_newest_block_is_given_back),
                cmocka_unit_test(test_realloc_keeps_the_contents),
                cmocka_unit_test(test_calloc_clears_and_checks_overflow),
                cmocka_unit_test(test_what_does_not_fit_is_mapped),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
