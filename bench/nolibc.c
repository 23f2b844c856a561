/* bench/nolibc.c — the cheapest programs to exec, for bench/floor.c: one
 * with no C library at all (its own _start, one exit system call) and,
 * built with -DWITH_LIBC, glibc's start alone (static, an empty main).
 * Between them and /bin/true: what a C library's start costs here; on a
 * virtual machine that traps every cpuid, glibc's start is mostly the
 * dozens of cpuid its x86 CPU-feature and cache probes run.
 *
 *   cc -O2 -static -nostdlib -o nolibc bench/nolibc.c
 *   cc -O2 -static -DWITH_LIBC -o static-libc bench/nolibc.c */
#if defined(WITH_LIBC) || !defined(__x86_64__)
int main(void)
{
        return 0;
}
#else
void _start(void);

void _start(void)
{
        __asm__ volatile("mov $60, %eax\n\txor %edi, %edi\n\tsyscall");
        __builtin_unreachable();
}
#endif
