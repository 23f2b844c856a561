/* supervisor_exec.c — how a sandbox that outlives the call that made it
 * gets its supervisor: a fresh program (brig-supervisor), started with
 * posix_spawn, never a fork of the caller. The caller may be a server with
 * many threads, locks held by them, a big heap and its own signal setup; a
 * forked copy of it would run jansson and c-ares on that state. The
 * program starts clean: default signal dispositions, an empty mask, no
 * descriptor of the caller's, and it learns what to run (the policy, as
 * the JSON brig_policy_to_json writes) from a sealed memfd, written whole
 * before it starts: a caller killed at any point after the start leaves
 * it a complete configuration (an ephemeral sandbox then ends and removes
 * itself), and no one can change it (a socket's stream, sent after the
 * start, was cut short by such a kill: the supervisor ended on a
 * malformed configuration and nobody removed the state directory).
 *
 * Which program: never one found through PATH or the environment. The one
 * beside the loaded libbrig (a build tree: build/libbrig.so.1 next to
 * build/brig-supervisor), else the one the install put in libexec/brig,
 * found from libbrig's own directory (DESTDIR, a moved prefix) or at the
 * configured path. Wherever it is found, it must be a regular file owned
 * by root or by us in a directory owned by root or by us, neither
 * writable by anyone else — a sandbox (or another user) that could put a
 * program there could already replace the library itself. It is opened
 * once, checked on that descriptor, and executed through it. */
#define _GNU_SOURCE
#include "core/model.h"
#include "core/program.h"
#include "core/reaper.h"
#include "engine/supervisor_exec.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <link.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#ifndef BRIG_LIBEXEC_FROM_LIBDIR
#define BRIG_LIBEXEC_FROM_LIBDIR "../libexec/brig"
#endif

extern char **environ;

static int program_open(const char *prog, char **path_out, brig_error **err);

/* The directory brig's programs are looked for in first (free()), or
 * NULL: the loaded libbrig's (a build tree: build/libbrig.so.1 beside
 * build/brig-supervisor), or, where libbrig is linked into the program
 * itself (brig-supervisor; the brig command, which links it statically
 * to spare its start the library's loading), that program's own, from
 * the kernel (/proc/self/exe), never from argv[0]. *linked_in says
 * which. */
static char *library_dir(bool *linked_in)
{
        Dl_info info;
        struct link_map *map = NULL;
        char real[PATH_MAX];
        if (dladdr1((void *)program_open, &info, (void **)&map, RTLD_DL_LINKMAP) == 0 || !map)
                return NULL;
        /* the main program's link map is the one without a name */
        *linked_in = !map->l_name || map->l_name[0] == '\0';
        const char *file = *linked_in ? "/proc/self/exe" : info.dli_fname;
        if (!file || (!*linked_in && file[0] != '/') || !realpath(file, real))
                return NULL;
        char *slash = strrchr(real, '/');
        *slash = '\0';
        return strdup(real[0] ? real : "/");
}

/* The directory of a program that links libbrig in, as it was when
 * supervisor_dir_pin ran: a pool's daemon lives on across an upgrade or
 * a rebuild, and once its own file is replaced /proc/self/exe names no
 * file, so it would find brig-supervisor nowhere and make no member
 * again. (A program loading libbrig.so, a server's, finds the library's
 * path as it was anyway.) What it then finds there is the program
 * installed now: the members made after an upgrade are the upgrade's. */
static char *pinned_dir;

void supervisor_dir_pin(void)
{
        bool linked_in = false;
        char *dir = library_dir(&linked_in);
        if (dir && linked_in) {
                free(pinned_dir);
                pinned_dir = dir;
        } else {
                free(dir);
        }
}

static int program_open(const char *prog, char **path_out, brig_error **err)
{
        /* Beside libbrig (a build tree), then where the install put it
         * relative to libbrig (a DESTDIR or a moved prefix), then where the
         * build was configured to install it. Never PATH. */
        bool linked_in = pinned_dir != NULL;
        _cleanup_free_ char *lib = pinned_dir ? strdup(pinned_dir) : library_dir(&linked_in);
        _cleanup_free_ char *rel =
                lib ? brig_strdup_printf("%s/%s", lib, linked_in ? BRIG_LIBEXEC_FROM_BINDIR : BRIG_LIBEXEC_FROM_LIBDIR)
                    : NULL;
        const char *dirs[] = { lib, rel, BRIG_LIBEXECDIR };
        for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
                if (!dirs[i])
                        continue;
                int fd = program_open_in(dirs[i], prog, err);
                if (fd == -ENOENT)
                        continue;
                if (fd >= 0 && path_out && !(*path_out = brig_strdup_printf("%s/%s", dirs[i], prog))) {
                        close(fd);
                        return brig_err(err, ENOMEM, "%s path", prog);
                }
                return fd;
        }
        return brig_err_code(err, BRIG_EXIT_SETUP, ENOENT,
                             "%s not found beside libbrig ('%s'), in '%s' nor in '%s'; is brig "
                             "installed completely?",
                             prog, lib ? lib : "?", rel ? rel : "?", BRIG_LIBEXECDIR);
}

int supervisor_exe_open(char **path_out, brig_error **err)
{
        return program_open("brig-supervisor", path_out, err);
}

int brig_program_open(const char *name, char **path, brig_error **err)
{
        /* brig's own programs only: a name is never a path */
        if (!name || (strcmp(name, "brig-supervisor") != 0 && strcmp(name, "brig-serve") != 0))
                return brig_err_code(err, BRIG_EXIT_SETUP, EINVAL, "'%s' is not one of brig's programs",
                                     name ? name : "(null)");
        return program_open(name, path, err);
}

/* What the program needs, as one JSON document. */
static char *supervisor_config(const char *dir, const char *name, const brig_policy *p,
                               const struct sandbox_create_opts *opts, brig_error **err)
{
        _cleanup_free_ char *policy = brig_policy_to_json(p, err);
        if (!policy)
                return NULL;
        json_error_t jerr;
        json_t *pol = json_loads(policy, 0, &jerr);
        json_t *doc = pol ? json_pack("{s:s, s:s, s:b, s:b, s:b, s:b, s:I, s:I, s:o}", "dir", dir, "name", name,
                                      "overlay", opts->overlay, "ephemeral", opts->ephemeral, "owned", opts->owned,
                                      "audit", opts->audit,
                                      "owner_pid", (json_int_t)opts->owner_pid, "owner_start",
                                      (json_int_t)opts->owner_start, "policy", pol)
                          : NULL;
        /* Not in the policy's JSON (they are the caller's, per run). */
        if (doc && p->report_path)
                json_object_set_new(doc, "report_path", json_string(p->report_path));
        char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
        json_decref(doc);
        if (!text)
                brig_err(err, ENOMEM, "supervisor configuration");
        return text;
}

/* The configuration in a memfd sealed against any change. */
static int config_memfd(const char *text, brig_error **err)
{
        int fd = memfd_create("brig-supervisor-config", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return brig_err(err, errno, "memfd for the supervisor's configuration");
        size_t len = strlen(text), off = 0;
        while (off < len) {
                ssize_t n = write(fd, text + off, len - off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        int e = n < 0 ? errno : EIO;
                        close(fd);
                        return brig_err(err, e, "write the supervisor's configuration");
                }
                off += (size_t)n;
        }
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
                int e = errno;
                close(fd);
                return brig_err(err, e, "seal the supervisor's configuration");
        }
        return fd;
}

/* A descriptor at SUPERVISOR_FD_MAX or above, so that the dup2s of the
 * spawn cannot overwrite one another's sources. */
static int high_fd(int fd)
{
        if (fd < 0 || fd >= SUPERVISOR_FD_MAX)
                return fd;
        int n = fcntl(fd, F_DUPFD_CLOEXEC, SUPERVISOR_FD_MAX);
        close(fd);
        return n;
}

int supervisor_spawn(const char *dir, const char *name, const brig_policy *p, const struct sandbox_create_opts *opts,
                     int ready_w, brig_error **err)
{
        _cleanup_free_ char *config = supervisor_config(dir, name, p, opts, err);
        if (!config)
                return err && *err && (*err)->errnum > 0 ? -(*err)->errnum : -ENOMEM;
        _cleanup_free_ char *log = brig_strdup_printf("%s/log", dir);
        if (!log)
                return brig_err(err, ENOMEM, "supervisor");
        return supervisor_start(config, log, name, ready_w, opts->has_hold ? opts->hold_fd : -1, err);
}

int supervisor_start(const char *config, const char *log, const char *what, int ready_w, int hold_fd,
                     brig_error **err)
{
        _cleanup_free_ char *exe_path = NULL;
        _cleanup_close_ int exe = high_fd(supervisor_exe_open(&exe_path, err));
        if (exe < 0)
                return exe == -1 ? brig_err(err, errno, "supervisor program") : exe;
        /* A daemon: no terminal, none of the caller's stdio; what it has to
         * say goes to the log in the state directory. */
        _cleanup_close_ int null = high_fd(open("/dev/null", O_RDWR | O_CLOEXEC));
        _cleanup_close_ int logfd = high_fd(open(log, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600));
        if (null < 0 || logfd < 0)
                return brig_err(err, errno, "supervisor log '%s'", log);
        _cleanup_close_ int cfg = config_memfd(config, err);
        if (cfg < 0)
                return cfg;
        cfg = high_fd(cfg);
        _cleanup_close_ int ready = high_fd(fcntl(ready_w, F_DUPFD_CLOEXEC, SUPERVISOR_FD_MAX));
        /* The hold's lock is the open file's: the supervisor's copy keeps
         * it locked when we close ours or are killed. */
        _cleanup_close_ int hold = high_fd(fcntl(hold_fd >= 0 ? hold_fd : null, F_DUPFD_CLOEXEC, SUPERVISOR_FD_MAX));
        if (cfg < 0 || ready < 0 || hold < 0)
                return brig_err(err, errno, "supervisor descriptors");

        posix_spawn_file_actions_t fa;
        posix_spawnattr_t attr;
        posix_spawn_file_actions_init(&fa);
        posix_spawnattr_init(&attr);
        posix_spawn_file_actions_adddup2(&fa, null, 0);
        posix_spawn_file_actions_adddup2(&fa, logfd, 1);
        posix_spawn_file_actions_adddup2(&fa, logfd, 2);
        posix_spawn_file_actions_adddup2(&fa, ready, SUPERVISOR_FD_READY);
        posix_spawn_file_actions_adddup2(&fa, cfg, SUPERVISOR_FD_CONFIG);
        posix_spawn_file_actions_adddup2(&fa, hold, SUPERVISOR_FD_HOLD);
        /* Executed through /proc/self/fd/N after the closefrom: N must be
         * below it; the program closes it first thing. */
        posix_spawn_file_actions_adddup2(&fa, exe, SUPERVISOR_FD_EXE);
        posix_spawn_file_actions_addclosefrom_np(&fa, SUPERVISOR_FD_EXE + 1);
        /* The caller's signal setup is not the supervisor's: default
         * dispositions (an ignored SIGTERM would make it unstoppable),
         * nothing blocked. Its own session: no terminal reaches it. */
        sigset_t none, all;
        sigemptyset(&none);
        sigfillset(&all);
        posix_spawnattr_setsigmask(&attr, &none);
        posix_spawnattr_setsigdefault(&attr, &all);
        posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSID);
        char fdpath[64];
        snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%d", SUPERVISOR_FD_EXE);
        char *argv[] = { "brig-supervisor", (char *)what, NULL };
        pid_t pid;
        int e = posix_spawn(&pid, fdpath, &fa, &attr, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&attr);
        /* Only the descriptor was checked, so only it is executed; the
         * kernel takes it by the /proc/self/fd name. */
        if (e == ENOENT && access("/proc/self/fd", F_OK) < 0)
                return brig_err_code(err, BRIG_EXIT_SETUP, e, "start %s through %s: /proc is not mounted here (brig "
                                     "needs the host's /proc)", exe_path, fdpath);
        if (e != 0)
                return brig_err(err, e, "start %s", exe_path);
        test_pause("supervisor-spawned");
        /* The program forks once and its first process exits at once (the
         * supervisor is nobody's child). */
        int status;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        return 0;
}
