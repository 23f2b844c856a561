"""Classic seccomp BPF, read and judged in Python, independently of brig's
own evaluator (src/lib/controls/seccomp_cache.c): the loaded filter of a
live process (PTRACE_SECCOMP_GET_FILTER, root only), a text form for a
reference kept in the tree, the decision for one seccomp_data, the
argument values worth trying for one syscall number, and the kernel's
constant-action cache (which numbers it decides without running the
filter). Used by test_seccomp_decisions.py and bench/seccomp."""
import ctypes
import itertools
import os
import re
import struct

AUDIT_ARCH_X86_64 = 0xC000003E
AUDIT_ARCH_I386 = 0x40000003
X32_BIT = 0x40000000
RET_ALLOW = 0x7FFF0000

_LD_ABS, _LD_IMM, _LDX_IMM, _RET_K, _RET_A, _JA = 0x20, 0x00, 0x01, 0x06, 0x16, 0x05
_JEQ, _JGT, _JGE, _JSET = 0x15, 0x25, 0x35, 0x45
_AND, _OR, _TAX, _TXA = 0x54, 0x44, 0x07, 0x87


def from_bytes(b):
    return [struct.unpack_from("<HBBI", b, i) for i in range(0, len(b) - len(b) % 8, 8)]


def to_text(prog):
    return "".join(f"{c:#06x} {jt} {jf} {k:#010x}\n" for c, jt, jf, k in prog)


def from_text(text):
    return [tuple(int(x, 0) for x in line.split()) for line in text.splitlines()
            if line.strip() and not line.startswith("#")]


def loaded_filter(pid, index=0):
    """The filter process pid has loaded (index 0: the newest), as the
    kernel holds it. Needs CAP_SYS_ADMIN; the process is stopped for the
    read (PTRACE_SEIZE + PTRACE_INTERRUPT) and let go."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.restype = ctypes.c_long
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    seize, interrupt, detach, get_filter = 0x4206, 0x4207, 17, 0x420C

    def call(req, addr, data):
        r = libc.ptrace(req, pid, addr, data)
        if r < 0:
            e = ctypes.get_errno()
            raise OSError(e, f"ptrace {req:#x} of {pid}: {os.strerror(e)}")
        return r

    call(seize, None, None)
    try:
        call(interrupt, None, None)
        os.waitpid(pid, 0x40000000)  # __WALL: the tracee's stop
        n = call(get_filter, index, None)
        buf = (ctypes.c_uint8 * (8 * n))()
        call(get_filter, index, ctypes.cast(buf, ctypes.c_void_p))
        return from_bytes(bytes(buf))
    finally:
        libc.ptrace(detach, pid, None, None)


def run(prog, nr, arch=AUDIT_ARCH_X86_64, args=(0,) * 6, ip=0, steps=None):
    """What the filter returns for this seccomp_data (the words of args as
    64-bit values); steps, a list, gets the number of instructions run.
    Raises on what the kernel would refuse to run."""
    data = struct.pack("<IIQ6Q", nr & 0xFFFFFFFF, arch, ip, *[a & (2**64 - 1) for a in args])
    a = x = n = 0
    pc = 0
    while pc < len(prog):
        c, jt, jf, k = prog[pc]
        n += 1  # instructions run, this one included
        # the jumps first: most of what a filter runs
        if c == _JGE:
            pc += (jt if a >= k else jf) + 1
            continue
        if c == _JEQ:
            pc += (jt if a == k else jf) + 1
            continue
        if c == _JGT:
            pc += (jt if a > k else jf) + 1
            continue
        if c == _LD_ABS:
            a = struct.unpack_from("<I", data, k)[0]
        elif c == _LD_IMM:
            a = k
        elif c == _LDX_IMM:
            x = k
        elif c == _TAX:
            x = a
        elif c == _TXA:
            a = x
        elif c == _AND:
            a &= k
        elif c == _OR:
            a |= k
        elif c in (_RET_K, _RET_A):
            if steps is not None:
                steps.append(n)
            return k if c == _RET_K else a
        elif c == _JA:
            pc += k
        elif c in (_JEQ, _JGT, _JGE, _JSET):
            taken = {_JEQ: a == k, _JGT: a > k, _JGE: a >= k, _JSET: bool(a & k)}[c]
            pc += jt if taken else jf
        else:
            raise ValueError(f"instruction {pc}: opcode {c:#x} not handled")
        pc += 1
    raise ValueError("fell off the end of the filter")


def const_action(prog, nr, arch=AUDIT_ARCH_X86_64):
    """The kernel's own test for its per-number cache (seccomp_is_const_allow,
    kernel/seccomp.c): the filter run with only nr and arch known; None when
    it loads anything else on the way (the number falls out of the cache and
    the filter runs on every such call), else the constant action."""
    a, pc = 0, 0
    while pc < len(prog):
        c, jt, jf, k = prog[pc]
        if c == _LD_ABS:
            if k not in (0, 4):
                return None
            a = nr & 0xFFFFFFFF if k == 0 else arch
        elif c == _RET_K:
            return k
        elif c == _JA:
            pc += k
        elif c in (_JEQ, _JGT, _JGE, _JSET):
            taken = {_JEQ: a == k, _JGT: a > k, _JGE: a >= k, _JSET: bool(a & k)}[c]
            pc += jt if taken else jf
        elif c == _AND:
            a &= k
        else:
            return None
        pc += 1
    return None


def arg_words(prog, nr, arch=AUDIT_ARCH_X86_64):
    """For one syscall number: each argument word (offset into seccomp_data,
    16..63) the filter may load, with the constants it is compared to (and
    the masks applied first): every path explored, nr and arch known."""
    seen, todo, words = set(), [(0, ("v", nr & 0xFFFFFFFF))], {}
    while todo:
        pc, acc = todo.pop()
        if (pc, acc) in seen or pc >= len(prog):
            continue
        seen.add((pc, acc))
        c, jt, jf, k = prog[pc]
        if c == _LD_ABS:
            acc = ("v", nr & 0xFFFFFFFF) if k == 0 else ("v", arch) if k == 4 else ("w", k, 0xFFFFFFFF)
            if acc[0] == "w":
                words.setdefault(k, set())
            todo.append((pc + 1, acc))
        elif c == _AND:
            acc = ("v", acc[1] & k) if acc[0] == "v" else ("w", acc[1], acc[2] & k)
            todo.append((pc + 1, acc))
        elif c == _JA:
            todo.append((pc + 1 + k, acc))
        elif c in (_JEQ, _JGT, _JGE, _JSET):
            if acc[0] == "v":
                a = acc[1]
                taken = {_JEQ: a == k, _JGT: a > k, _JGE: a >= k, _JSET: bool(a & k)}[c]
                todo.append((pc + 1 + (jt if taken else jf), acc))
            else:
                words[acc[1]].add((c, acc[2], k))
                todo += [(pc + 1 + jt, acc), (pc + 1 + jf, acc)]
        elif c in (_RET_K, _RET_A):
            continue
        else:
            todo.append((pc + 1, acc))  # X moves and the like: a value no jump of libseccomp's reads
    return words


def candidates(tests):
    """Values of one 32-bit word that reach every side of every test on it:
    each constant, its neighbours, each masked bit flipped, 0 and all ones."""
    vals = {0, 0xFFFFFFFF}
    for op, mask, k in tests:
        for v in (k, k - 1, k + 1, k | ~mask, k & mask):
            vals.add(v & 0xFFFFFFFF)
        if op == _JSET:
            vals |= {k & 0xFFFFFFFF, ~k & 0xFFFFFFFF}
        for bit in range(32):
            if mask & (1 << bit):
                vals.add((k ^ (1 << bit)) & 0xFFFFFFFF)
    return sorted(vals)


def argument_vectors(progs, nr, limit=200000):
    """Every combination of the candidate values of the words any of progs
    tests for nr (at most limit; beyond that each word is varied alone,
    the others at 0)."""
    words = {}
    for p in progs:
        for off, tests in arg_words(p, nr).items():
            words.setdefault(off, set()).update(tests)
    offs = sorted(words)
    cands = [candidates(words[o]) for o in offs]
    combos = 1
    for c in cands:
        combos *= len(c)
    if combos > limit:
        space = [dict([(o, v)]) for o, c in zip(offs, cands) for v in c]
    else:
        space = [dict(zip(offs, vs)) for vs in itertools.product(*cands)]
    for assign in space:
        args = [0] * 6
        for off, v in assign.items():
            i, hi = divmod(off - 16, 8)
            args[i] |= v << (32 if hi >= 4 else 0)
        yield tuple(args)


# Numbers past every table: where a dispatch over ranges of numbers ends
# (2^30 is x32's bit, 2^31 the sign, 2^32 - 1 is -1: "no call").
FAR = (1024, 4095, 0x3FFFFFFF, 0x7FFFFFFF, 0x80000000, 0xBFFFFFFF, 0xFFFFFFFE, 0xFFFFFFFF)


def decisions(prog, other=None, numbers=range(0, 1024), wide=False):
    """{(nr, arch, args): action} over every number, argument vectors from
    both programs where other is given, x32 and i386 spellings too (wide:
    every number of those, and the numbers of FAR)."""
    progs = [prog] + ([other] if other is not None else [])
    out = {}
    for nr in numbers:
        for args in argument_vectors(progs, nr):
            out[(nr, AUDIT_ARCH_X86_64, args)] = run(prog, nr, args=args)
    for nr in (numbers if wide else (0, 1, 59, 110, 322, 512, 1000)):
        out[(nr | X32_BIT, AUDIT_ARCH_X86_64, (0,) * 6)] = run(prog, nr | X32_BIT)
        out[(nr, AUDIT_ARCH_I386, (0,) * 6)] = run(prog, nr, arch=AUDIT_ARCH_I386)
    for nr in FAR if wide else ():
        out[(nr, AUDIT_ARCH_X86_64, (0,) * 6)] = run(prog, nr)
        out[(nr, AUDIT_ARCH_I386, (0,) * 6)] = run(prog, nr, arch=AUDIT_ARCH_I386)
    out[(-1, AUDIT_ARCH_X86_64, (0,) * 6)] = run(prog, -1)
    return out


def syscall_names(header="/usr/include/x86_64-linux-gnu/asm/unistd_64.h"):
    names = {}
    try:
        for m in re.finditer(r"#define __NR_(\w+) (\d+)", open(header).read()):
            names[int(m.group(2))] = m.group(1)
    except OSError:
        pass
    return names


def action_name(ret):
    act, data = ret & 0xFFFF0000, ret & 0xFFFF
    return {0x7FFF0000: "allow", 0x7FFC0000: "log", 0x7FC00000: "notify", 0x00050000: f"errno {data}",
            0x80000000: "kill-process", 0x00000000: "kill-thread", 0x7FF00000: "trace"}.get(act, f"{ret:#x}")
