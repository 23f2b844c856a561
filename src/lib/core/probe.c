/* probe.c — what this host can do, probed once per process (host_probe)
 * or in depth for `brig doctor`. */
#define _GNU_SOURCE
#include "core/syscalls.h"
#include "core/host.h"
#include "core/wall.h"
#include "net/netns.h"
#include "controls/cgroup.h"

#include <fcntl.h>
#include <jansson.h>
#include <linux/landlock.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>

/* Is there a namespace of this kind: an entry /proc/self/ns/NAME (the
 * kernel lists the kinds it has)? The entry itself, from NS (that
 * directory opened once; -1: by its whole path): following the link to
 * the namespace cost the kernel 10-15 us a kind, and our own link always
 * leads to its namespace. */
static bool ns_exists_in(int ns, const char *name)
{
        char path[64];
        if (ns >= 0)
                return faccessat(ns, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
        snprintf(path, sizeof path, "/proc/self/ns/%s", name);
        return faccessat(AT_FDCWD, path, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

static bool ns_exists(const char *name)
{
        return ns_exists_in(-1, name);
}

/* Does the syscall exist? ENOSYS is the only answer that says no. */
static bool syscall_exists(long nr, long a, long b, long c)
{
        return syscall(nr, a, b, c, 0, 0) >= 0 || errno != ENOSYS;
}

const struct host_features *host_probe(void)
{
        static struct host_features f;
        static bool done;
        if (done)
                return &f;
        int ns = open("/proc/self/ns", O_PATH | O_DIRECTORY | O_CLOEXEC);
        /* The kind only. The switches that turn user namespaces off
         * (user.max_user_namespaces, kernel.unprivileged_userns_clone for
         * the unprivileged, AppArmor's) are read where they are said with
         * their fix, restrict_userns — by every run's check_host and by
         * brig doctor, fresh each time (a server's probe stays): read here
         * as well, they cost a start 25 us (the first look at each /proc/sys
         * file is dear), and unprivileged_userns_clone = 0 made root's
         * user namespaces "not available" though it binds only the
         * unprivileged. */
        f.userns = ns_exists_in(ns, "user");
        f.ns_time = ns_exists_in(ns, "time");
        f.ns_cgroup = ns_exists_in(ns, "cgroup");
        if (ns >= 0)
                close(ns);
        f.mount_api = syscall_exists(SYS_open_tree, -1, 0, 0) && syscall_exists(SYS_mount_setattr, -1, 0, 0) &&
                      syscall_exists(SYS_fsopen, 0, 0, 0) && syscall_exists(SYS_move_mount, -1, 0, -1);
        f.openat2 = syscall_exists(SYS_openat2, -1, 0, 0);
        f.clone3 = syscall_exists(SYS_clone3, 0, 0, 0);
        f.seccomp = prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0;
        done = true;
        return &f;
}

/* Run `fn` in a forked child; true when it exits 0. */
static bool in_child(int (*fn)(void))
{
        pid_t pid = fork();
        if (pid < 0)
                return false;
        if (pid == 0)
                _exit(fn() == 0 ? 0 : 1);
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static int try_userns(void)
{
        return unshare(CLONE_NEWUSER);
}

/* How unshare(CLONE_NEWUSER) ends in a child: 0 or its errno. */
static int userns_errno(void)
{
        int fake = restrict_fake_userns_errno();
        if (fake)
                return fake;
        pid_t pid = fork();
        if (pid < 0)
                return errno;
        if (pid == 0)
                _exit(unshare(CLONE_NEWUSER) == 0 ? 0 : (errno & 0xff));
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        return WIFEXITED(st) ? WEXITSTATUS(st) : EPERM;
}

static int try_overlay_in_userns(void)
{
        uid_t uid = geteuid();
        gid_t gid = getegid();
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
                return -1;
        char map[64];
        int fd = open("/proc/self/setgroups", O_WRONLY);
        if (fd >= 0) {
                (void)!write(fd, "deny", 4);
                close(fd);
        }
        snprintf(map, sizeof map, "0 %u 1", uid);
        fd = open("/proc/self/uid_map", O_WRONLY);
        if (fd < 0 || write(fd, map, strlen(map)) < 0)
                return -1;
        close(fd);
        snprintf(map, sizeof map, "0 %u 1", gid);
        fd = open("/proc/self/gid_map", O_WRONLY);
        if (fd < 0 || write(fd, map, strlen(map)) < 0)
                return -1;
        close(fd);
        /* all of it in a tmpfs of our own: nothing touches the host */
        int t = sys_fsopen("tmpfs", 0);
        if (t < 0 || sys_fsconfig(t, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return -1;
        int m = sys_fsmount(t, 0, 0);
        if (m < 0)
                return -1;
        if (mkdirat(m, "l", 0755) < 0 || mkdirat(m, "u", 0755) < 0 || mkdirat(m, "w", 0755) < 0)
                return -1;
        int o = sys_fsopen("overlay", 0);
        if (o < 0)
                return -1;
        char opt[64];
        snprintf(opt, sizeof opt, "/proc/self/fd/%d/l", m);
        if (sys_fsconfig(o, FSCONFIG_SET_STRING, "lowerdir", opt, 0) < 0)
                return -1;
        snprintf(opt, sizeof opt, "/proc/self/fd/%d/u", m);
        if (sys_fsconfig(o, FSCONFIG_SET_STRING, "upperdir", opt, 0) < 0)
                return -1;
        snprintf(opt, sizeof opt, "/proc/self/fd/%d/w", m);
        if (sys_fsconfig(o, FSCONFIG_SET_STRING, "workdir", opt, 0) < 0)
                return -1;
        return sys_fsconfig(o, FSCONFIG_CMD_CREATE, NULL, NULL, 0);
}

#ifndef SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
#define SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (1UL << 5)  /* Linux 5.19 */
#endif

static int landlock_abi(void)
{
        long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
        return abi < 0 ? 0 : (int)abi;
}

static json_t *seccomp_json(void)
{
        json_t *o = json_object();
        bool filter = prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0;
        json_object_set_new(o, "available", json_boolean(filter));
        static const struct { const char *name; unsigned action; } actions[] = {
                { "kill_process", SECCOMP_RET_KILL_PROCESS }, { "errno", SECCOMP_RET_ERRNO },
                { "user_notif", SECCOMP_RET_USER_NOTIF }, { "log", SECCOMP_RET_LOG },
                { "trap", SECCOMP_RET_TRAP },
        };
        json_t *a = json_object();
        for (size_t i = 0; i < ARRAY_SIZE(actions); i++) {
                unsigned act = actions[i].action;
                bool ok = syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &act) == 0;
                json_object_set_new(a, actions[i].name, json_boolean(ok));
        }
        json_object_set_new(o, "actions", a);
        /* Linux 5.19: once the supervisor has a call, only a killing signal
         * ends the caller's wait (controls/seccomp.c). Asked with no
         * program: flags it knows fail on the copy (EFAULT), others EINVAL. */
        bool killable = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                                SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, NULL) < 0 &&
                        errno == EFAULT;
        json_object_set_new(o, "wait_killable_recv", json_boolean(killable));
        return o;
}

/* cgroup v2 at /sys/fs/cgroup (unified) or hybrid/v1: which controllers
 * each offers. */
static json_t *cgroup_json(void)
{
        json_t *o = json_object();
        struct stat st;
        bool pure_v2 = access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0;
        bool hybrid_v2 = !pure_v2 && access("/sys/fs/cgroup/unified/cgroup.controllers", F_OK) == 0;
        const char *mode = pure_v2 ? "v2" : (stat("/sys/fs/cgroup/memory", &st) == 0 ? (hybrid_v2 ? "hybrid" : "v1") : "none");
        json_object_set_new(o, "mode", json_string(mode));
        json_t *v2 = json_array();
        FILE *f = fopen(pure_v2 ? "/sys/fs/cgroup/cgroup.controllers" : "/sys/fs/cgroup/unified/cgroup.controllers", "re");
        if (f) {
                char word[64];
                while (fscanf(f, "%63s", word) == 1)
                        json_array_append_new(v2, json_string(word));
                fclose(f);
        }
        json_object_set_new(o, "v2_controllers", v2);
        json_t *v1 = json_array();
        static const char *const ctl[] = { "memory", "pids", "cpu", "blkio", "freezer" };
        for (size_t i = 0; !pure_v2 && i < ARRAY_SIZE(ctl); i++) {
                char path[64];
                snprintf(path, sizeof path, "/sys/fs/cgroup/%s", ctl[i]);
                if (stat(path, &st) == 0)
                        json_array_append_new(v1, json_string(ctl[i]));
        }
        json_object_set_new(o, "v1_controllers", v1);
        return o;
}

static bool kernel_has_symbol(const char *name)
{
        FILE *f = fopen("/proc/kallsyms", "re");
        if (!f)
                return false;
        char line[512];
        size_t n = strlen(name);
        bool found = false;
        while (!found && fgets(line, sizeof line, f)) {
                char *sym = strrchr(line, ' ');
                found = sym && strncmp(sym + 1, name, n) == 0 && (sym[1 + n] == '\n' || sym[1 + n] == '\t');
        }
        fclose(f);
        return found;
}

static bool nft_nat_module(void)
{
        /* Built in, loaded, or available to load on demand. */
        if (access("/sys/module/nft_chain_nat", F_OK) == 0 || kernel_has_symbol("nft_nat_eval"))
                return true;
        struct utsname u;
        if (uname(&u) < 0)
                return false;
        char path[256];
        const char *ext[] = { ".ko", ".ko.xz", ".ko.zst", ".ko.gz" };
        for (size_t i = 0; i < ARRAY_SIZE(ext); i++) {
                snprintf(path, sizeof path, "/lib/modules/%s/kernel/net/netfilter/nft_chain_nat%s", u.release, ext[i]);
                if (access(path, F_OK) == 0)
                        return true;
        }
        snprintf(path, sizeof path, "/lib/modules/%s/modules.builtin", u.release);
        FILE *f = fopen(path, "re");
        bool found = false;
        char line[512];
        while (f && !found && fgets(line, sizeof line, f))
                found = strstr(line, "nft_chain_nat") != NULL;
        if (f)
                fclose(f);
        return found;
}

/* Filtered mode for real: its rules and routes, in a user and network
 * namespace of our own that vanishes with this child. */
static int try_filtered_mode(void)
{
        if (unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0)
                return -1;
        bool ipv6;
        return netns_loopback_up(NULL) == 0 && netfilter_redirect_egress(NULL) == 0 &&
                               netns_route_through_loopback(&ipv6, NULL) == 0
                       ? 0 : -1;
}

static json_t *doctor(bool *ok)
{
        const struct host_features *f = host_probe();
        json_t *doc = json_object();
        struct utsname u;
        if (uname(&u) == 0)
                json_object_set_new(doc, "kernel", json_string(u.release));
        json_object_set_new(doc, "rootless", json_boolean(geteuid() != 0));
        struct userns_restriction why;
        bool restricted = restrict_userns(userns_errno(), &why);
        bool userns = !restricted && f->userns && in_child(try_userns);
        json_t *ns = json_object();
        static const char *const kinds[] = { "user", "mnt", "pid", "net", "ipc", "uts", "cgroup", "time" };
        for (size_t i = 0; i < ARRAY_SIZE(kinds); i++)
                json_object_set_new(ns, kinds[i], json_boolean(ns_exists(kinds[i])));
        json_object_set_new(doc, "user_namespaces", json_boolean(userns));
        json_object_set_new(doc, "userns_restriction",
                            restricted ? json_pack("{s:s, s:s, s:s}", "id", why.id, "what", why.what, "fix", why.fix)
                                       : json_null());
        char detail[600];
        const char *container = restrict_container(detail, sizeof detail);
        json_object_set_new(doc, "container", container ? json_pack("{s:s, s:s}", "kind", container, "detail", detail)
                                                        : json_null());
        json_object_set_new(doc, "namespaces", ns);
        json_object_set_new(doc, "mount_api", json_boolean(f->mount_api));
        json_object_set_new(doc, "openat2", json_boolean(f->openat2));
        json_object_set_new(doc, "clone3", json_boolean(f->clone3));
        json_object_set_new(doc, "seccomp", seccomp_json());
        json_object_set_new(doc, "landlock_abi", json_integer(restrict_fake_landlock_abi(landlock_abi())));
        json_object_set_new(doc, "cgroup", cgroup_json());
        const char *kind = cgroup_memory_outlook(detail, sizeof detail);
        json_object_set_new(doc, "memory_limit", json_pack("{s:s, s:s}", "enforced_by", kind, "detail", detail));
        json_object_set_new(doc, "overlay_in_userns", json_boolean(userns && in_child(try_overlay_in_userns)));
        json_object_set_new(doc, "nftables_nat_module", json_boolean(nft_nat_module()));
        json_object_set_new(doc, "filtered_mode", json_boolean(userns && in_child(try_filtered_mode)));
        /* The walls (docs/walls.md): gVisor's runs inside brig's own
         * namespaces, so it needs them too. */
        char runsc[4096] = "", why_not[256] = "";
        bool gvisor = wall_gvisor_probe(runsc, sizeof runsc, why_not, sizeof why_not) == 0;
        if (gvisor && !userns) {
                gvisor = false;
                snprintf(why_not, sizeof why_not, "it runs inside brig's namespaces, and user namespaces are missing");
        }
        json_object_set_new(doc, "walls",
                            json_pack("{s:{s:b, s:o}, s:{s:b, s:o, s:o}}",
                                      "namespaces", "available", userns, "why_not",
                                      userns ? json_null() : json_string("user namespaces are missing"),
                                      "gvisor", "available", gvisor, "runsc", runsc[0] ? json_string(runsc) : json_null(),
                                      "why_not", gvisor ? json_null() : json_string(why_not)));
        json_t *missing = json_array();
        if (restricted)
                json_array_append_new(missing, json_sprintf("user namespaces: %s (to fix: %s)", why.what, why.fix));
        else if (!userns)
                json_array_append_new(missing, json_string("user namespaces (brig run needs them)"));
        if (!f->mount_api || !f->openat2 || !f->clone3)
                json_array_append_new(missing, json_string("new mount API, openat2 or clone3 (Linux 5.15+)"));
        static const char *const needed[] = { "mnt", "pid", "net", "ipc", "uts", "cgroup" };
        for (size_t i = 0; i < ARRAY_SIZE(needed); i++)
                if (!ns_exists(needed[i]))
                        json_array_append_new(missing, json_sprintf("%s namespaces", needed[i]));
        json_t *sc = json_object_get(doc, "seccomp");
        if (json_is_true(json_object_get(sc, "available")) &&
            !json_is_true(json_object_get(json_object_get(sc, "actions"), "user_notif")))
                json_array_append_new(missing, json_string("seccomp user notification (the unix socket guard; "
                                                           "Linux 5.0+)"));
        *ok = json_array_size(missing) == 0;
        json_object_set_new(doc, "run_defaults_ok", json_boolean(*ok));
        json_object_set_new(doc, "missing", missing);
        return doc;
}

char *brig_doctor_json(bool *ok, brig_error **err)
{
        json_t *doc = doctor(ok);
        char *s = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        json_decref(doc);
        if (!s)
                brig_err(err, ENOMEM, "doctor");
        return s;
}

static void line(FILE *out, bool good, const char *what, const char *detail)
{
        fprintf(out, "  %-4s %-28s %s\n", good ? "ok" : "--", what, detail);
}

char *brig_doctor_text(bool *ok, brig_error **err)
{
        json_t *doc = doctor(ok);
        char *buf = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&buf, &len);
        if (!out) {
                json_decref(doc);
                brig_err(err, errno, "doctor");
                return NULL;
        }
        fprintf(out, "brig %s on Linux %s (%s)\n", brig_version(),
                json_string_value(json_object_get(doc, "kernel")),
                json_is_true(json_object_get(doc, "rootless")) ? "rootless" : "root");
        line(out, json_is_true(json_object_get(doc, "user_namespaces")), "user namespaces", "sandbox without root");
        json_t *why = json_object_get(doc, "userns_restriction");
        if (json_is_object(why))
                fprintf(out, "       restricted: %s\n       to fix: %s\n", json_string_value(json_object_get(why, "what")),
                        json_string_value(json_object_get(why, "fix")));
        json_t *box = json_object_get(doc, "container");
        if (json_is_object(box))
                fprintf(out, "       in a %s container (%s)\n", json_string_value(json_object_get(box, "kind")),
                        json_string_value(json_object_get(box, "detail")));
        json_t *ns = json_object_get(doc, "namespaces");
        const char *key;
        json_t *v;
        json_object_foreach(ns, key, v) {
                char what[64];
                snprintf(what, sizeof what, "%s namespace", key);
                line(out, json_is_true(v), what, strcmp(key, "time") == 0 ? "optional" : "required");
        }
        line(out, json_is_true(json_object_get(doc, "mount_api")) && json_is_true(json_object_get(doc, "openat2")),
             "fd-based mounts, openat2", "symlink-safe filesystem setup");
        json_t *sc = json_object_get(doc, "seccomp");
        line(out, json_is_true(json_object_get(sc, "available")), "seccomp filter", "");
        json_object_foreach(json_object_get(sc, "actions"), key, v) {
                char what[64];
                snprintf(what, sizeof what, "seccomp action %s", key);
                /* every connect waits for the supervisor's unix socket guard */
                line(out, json_is_true(v), what,
                     strcmp(key, "user_notif") == 0 ? "unix socket guard, --audit (required)" : "");
        }
        line(out, json_is_true(json_object_get(sc, "wait_killable_recv")), "seccomp wait-killable",
             json_is_true(json_object_get(sc, "wait_killable_recv"))
                     ? "a guarded connect ends with its caller's wait (Linux 5.19)"
                     : "older kernel: a guarded connect a handled signal interrupted may still complete within "
                       "20 ms (the socket guard's watcher ends it)");
        char detail[64];
        json_int_t abi = json_integer_value(json_object_get(doc, "landlock_abi"));
        snprintf(detail, sizeof detail, "ABI %lld", (long long)abi);
        line(out, abi > 0, "Landlock", abi > 0 ? detail : "not available");
        json_t *cg = json_object_get(doc, "cgroup");
        char ctl[256] = "";
        size_t i;
        json_array_foreach(json_object_get(cg, "v2_controllers"), i, v) {
                strncat(ctl, " v2:", sizeof ctl - strlen(ctl) - 1);
                strncat(ctl, json_string_value(v), sizeof ctl - strlen(ctl) - 1);
        }
        json_array_foreach(json_object_get(cg, "v1_controllers"), i, v) {
                strncat(ctl, " v1:", sizeof ctl - strlen(ctl) - 1);
                strncat(ctl, json_string_value(v), sizeof ctl - strlen(ctl) - 1);
        }
        snprintf(detail, sizeof detail, "%s", json_string_value(json_object_get(cg, "mode")));
        line(out, strcmp(detail, "none") != 0, "cgroups", detail);
        fprintf(out, "       controllers:%s\n", ctl);
        json_t *mem = json_object_get(doc, "memory_limit");
        line(out, strcmp(json_string_value(json_object_get(mem, "enforced_by")), "rlimit") != 0, "memory limit (--memory)",
             json_string_value(json_object_get(mem, "detail")));
        line(out, json_is_true(json_object_get(doc, "overlay_in_userns")), "overlayfs in user namespace", "");
        line(out, json_is_true(json_object_get(doc, "nftables_nat_module")), "nftables NAT", "kernel support present");
        line(out, json_is_true(json_object_get(doc, "filtered_mode")), "network mode filtered",
             json_is_true(json_object_get(doc, "filtered_mode")) ? "nftables redirect works unprivileged"
                                                                  : "unavailable: allow rules use proxy mode");
        json_object_foreach(json_object_get(doc, "walls"), key, v) {
                char what[64], because[400];
                snprintf(what, sizeof what, "wall %s (--wall %s)", key, key);
                json_t *runsc = json_object_get(v, "runsc");
                if (json_is_true(json_object_get(v, "available")))
                        snprintf(because, sizeof because, "%s%s", json_is_string(runsc) ? "runsc at " : "available",
                                 json_is_string(runsc) ? json_string_value(runsc) : "");
                else
                        snprintf(because, sizeof because, "missing: %s",
                                 json_string_value(json_object_get(v, "why_not")));
                line(out, json_is_true(json_object_get(v, "available")), what, because);
        }
        if (*ok) {
                fprintf(out, "brig run's defaults hold on this host.\n");
        } else {
                fprintf(out, "brig run cannot honour its defaults here; missing:\n");
                json_array_foreach(json_object_get(doc, "missing"), i, v)
                        fprintf(out, "  - %s\n", json_string_value(v));
        }
        fclose(out);
        json_decref(doc);
        return buf;
}
