/* restrict.c — what a host does to keep user namespaces from brig, found
 * by name, with its fix: the refusal and `brig doctor` say which one was
 * met instead of a bare EPERM (docs/hosts.md).
 *
 *   user.max_user_namespaces = 0              no user namespace for anyone
 *   kernel.unprivileged_userns_clone = 0      Debian's and older Ubuntu's switch
 *   kernel.apparmor_restrict_unprivileged_userns = 1
 *                                             Ubuntu 23.10+: an unconfined process
 *                                             gets a user namespace without
 *                                             capabilities (mounts then fail)
 *                                             unless its AppArmor profile says
 *                                             `userns,` (contrib/apparmor/brig)
 *   a container (Docker, Podman, containerd, LXC) whose seccomp profile
 *   refuses unshare/clone(CLONE_NEWUSER): EPERM from the probe, with a
 *   filter brig did not install (Seccomp: 2) and the container's marks
 *
 * Every file is read through restrict_path(), which a test build
 * (meson -Dtest_hooks=true) points at fake files under
 * $BRIG_TEST_PROBE_ROOT, where brig-userns-errno, brig-landlock-abi and
 * brig-seccomp also stand for what the kernel would answer; a release
 * build reads the host's only. */
#define _GNU_SOURCE
#include "core/host.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

const char *restrict_path(const char *path, char *buf, size_t n)
{
#ifdef BRIG_TEST_HOOKS
        const char *root = getenv("BRIG_TEST_PROBE_ROOT");
        if (root && *root) {
                snprintf(buf, n, "%s%s", root, path);
                return buf;
        }
#endif
        (void)buf;
        (void)n;
        return path;
}

/* The first line of a host file, or "" when it is absent. */
static void first_line(const char *path, char *out, size_t n)
{
        char where[4096];
        FILE *f = fopen(restrict_path(path, where, sizeof where), "re");
        out[0] = '\0';
        if (f) {
                if (!fgets(out, (int)n, f))
                        out[0] = '\0';
                fclose(f);
        }
        out[strcspn(out, "\n")] = '\0';
}

static long sysctl_value(const char *path, long absent)
{
        char line[64];
        first_line(path, line, sizeof line);
        char *end;
        long v = strtol(line, &end, 10);
        return end == line ? absent : v;
}

static bool host_file_exists(const char *path)
{
        char where[4096];
        return access(restrict_path(path, where, sizeof where), F_OK) == 0;
}

/* Does a line of the file contain `word`? */
static bool file_mentions(const char *path, const char *word)
{
        char where[4096], line[1024];
        FILE *f = fopen(restrict_path(path, where, sizeof where), "re");
        bool found = false;
        while (f && !found && fgets(line, sizeof line, f))
                found = strstr(line, word) != NULL;
        if (f)
                fclose(f);
        return found;
}

/* Test builds: a number the fake root holds in FILE, else `real`. */
static int fake_number(const char *file, int real)
{
#ifdef BRIG_TEST_HOOKS
        char line[32];
        first_line(file, line, sizeof line);
        if (getenv("BRIG_TEST_PROBE_ROOT") && *line)
                return atoi(line);
#else
        (void)file;
#endif
        return real;
}

int restrict_fake_landlock_abi(int real)
{
        return fake_number("/brig-landlock-abi", real);
}

bool restrict_fake_seccomp(bool real)
{
        return fake_number("/brig-seccomp", real) != 0;
}

/* The fake root says how unshare(CLONE_NEWUSER) would end (an errno
 * number), so a container's refusal can be shown on a host that allows it. */
int restrict_fake_userns_errno(void)
{
        return fake_number("/brig-userns-errno", 0);
}

const char *restrict_container(char *detail, size_t n)
{
        static const struct { const char *file, *name; } marks[] = {
                { "/.dockerenv", "Docker" }, { "/run/.containerenv", "Podman" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(marks); i++)
                if (host_file_exists(marks[i].file)) {
                        snprintf(detail, n, "%s exists", marks[i].file);
                        return marks[i].name;
                }
        static const struct { const char *word, *name; } groups[] = {
                { "docker", "Docker" }, { "libpod", "Podman" }, { "kubepods", "Kubernetes" },
                { "containerd", "containerd" }, { "lxc", "LXC" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(groups); i++)
                if (file_mentions("/proc/1/cgroup", groups[i].word)) {
                        snprintf(detail, n, "/proc/1/cgroup names %s", groups[i].word);
                        return groups[i].name;
                }
        detail[0] = '\0';
        return NULL;
}

/* A seccomp filter on brig itself: brig installs none in its own process,
 * so it is the container's or the caller's. */
static int foreign_filters(void)
{
        char where[4096], line[256];
        FILE *f = fopen(restrict_path("/proc/self/status", where, sizeof where), "re");
        int mode = 0, filters = 0;
        while (f && fgets(line, sizeof line, f)) {
                (void)(sscanf(line, "Seccomp: %d", &mode) == 1);
                (void)(sscanf(line, "Seccomp_filters: %d", &filters) == 1);
        }
        if (f)
                fclose(f);
        return mode == 2 ? (filters ? filters : 1) : 0;
}

static bool met(struct userns_restriction *out, const char *id, const char *what, const char *fix)
{
        out->id = id;
        snprintf(out->what, sizeof out->what, "%s", what);
        snprintf(out->fix, sizeof out->fix, "%s", fix);
        return true;
}

/* The switches that turn user namespaces off, by value. */
static const struct {
        const char *file, *id;
        bool rootless_only;
        const char *what, *fix;
} switches[] = {
        { "/proc/sys/user/max_user_namespaces", "max_user_namespaces", false,
          "user.max_user_namespaces is 0: no process may make a user namespace",
          "sysctl -w user.max_user_namespaces=15000 as root (persist it in /etc/sysctl.d/); docs/hosts.md" },
        { "/proc/sys/kernel/unprivileged_userns_clone", "unprivileged_userns_clone", true,
          "kernel.unprivileged_userns_clone is 0: user namespaces are for root only on this kernel",
          "sysctl -w kernel.unprivileged_userns_clone=1 as root (persist it in /etc/sysctl.d/), or run brig as "
          "root; docs/hosts.md" },
};

bool restrict_userns(int probe_errno, struct userns_restriction *out)
{
        memset(out, 0, sizeof *out);
        for (size_t i = 0; i < ARRAY_SIZE(switches); i++)
                if ((!switches[i].rootless_only || geteuid() != 0) && sysctl_value(switches[i].file, 1) == 0)
                        return met(out, switches[i].id, switches[i].what, switches[i].fix);
        if (geteuid() != 0 && sysctl_value("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", 0) == 1) {
                /* Only an unconfined process is restricted: a profile that
                 * grants `userns,` labels brig with its name. */
                char label[256];
                first_line("/proc/self/attr/apparmor/current", label, sizeof label);
                if (!*label)
                        first_line("/proc/self/attr/current", label, sizeof label);
                if (!*label || strncmp(label, "unconfined", 10) == 0)
                        return met(out, "apparmor",
                                   "AppArmor restricts unprivileged user namespaces "
                                   "(kernel.apparmor_restrict_unprivileged_userns is 1, Ubuntu 23.10+) and brig runs "
                                   "without a profile that allows them",
                                   "install brig's AppArmor profile (contrib/apparmor/brig: meson setup "
                                   "-Dapparmor=enabled, meson install, then apparmor_parser -r "
                                   "/etc/apparmor.d/brig), or run brig as root; docs/hosts.md");
        }
        if (probe_errno == 0)
                return false;
        char detail[128];
        const char *container = restrict_container(detail, sizeof detail);
        int filters = foreign_filters();
        char what[320];
        if (container || filters) {
                char who[192];
                if (container)
                        snprintf(who, sizeof who, "this %s container (%s%s)", container, detail,
                                 filters ? ", under a seccomp filter brig did not install" : "");
                else
                        snprintf(who, sizeof who, "a seccomp filter brig did not install (Seccomp: 2 in "
                                                  "/proc/self/status: a container's or a parent's)");
                snprintf(what, sizeof what, "%s refuses user namespaces: unshare(CLONE_NEWUSER) or clone3 fails "
                                            "with %s", who, strerrorname_np(probe_errno) ?: strerror(probe_errno));
                return met(out, "container", what,
                           "start the container with --security-opt seccomp=contrib/docker/seccomp-brig.json "
                           "--security-opt systempaths=unconfined (and --security-opt apparmor=unconfined on an "
                           "AppArmor host), or run brig outside it; docs/hosts.md");
        }
        snprintf(what, sizeof what, "unshare(CLONE_NEWUSER) is refused (%s) by no restriction brig knows",
                 strerrorname_np(probe_errno) ?: strerror(probe_errno));
        return met(out, "unknown", what, "look for a security module (SELinux, AppArmor, a seccomp filter of a parent "
                                         "process) that refuses user namespaces; docs/hosts.md");
}
