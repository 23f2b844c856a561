/* caps.c — dropping every capability, for good. */
#define _GNU_SOURCE
#include "controls/caps.h"

#include <linux/capability.h>
#include <linux/securebits.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

/* The kernel's capabilities are 0 up to its last, and PR_CAPBSET_DROP and
 * PR_CAPBSET_READ answer EINVAL for the first number past it: that is
 * where the walks below stop, whatever our headers know (a newer kernel
 * may know more: never drop fewer). /proc/sys/kernel/cap_last_cap, read
 * twice by the child before, cost 10-20 us each: the first open of a
 * /proc/sys file in new namespaces. A walk that ends another way (another
 * errno, none at all, or past CAP_WALK_MAX) fails the run. */
#define CAP_WALK_MAX 1024

int caps_drop_bounding(brig_error **err)
{
        /* Needs CAP_SETPCAP, so it comes before the uid change. Without the
         * bounding set, no execve can hand a capability back (file caps,
         * setuid root in a namespace where inside 0 is mapped). */
        int cap = 0;
        while (cap < CAP_WALK_MAX && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0)
                cap++;
        if (cap == CAP_WALK_MAX || errno != EINVAL || cap == 0)
                return brig_err(err, cap == CAP_WALK_MAX ? E2BIG : errno,
                                "drop capability %d from the bounding set", cap);
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
                return brig_err(err, errno, "clear ambient capabilities");
        /* Lock "root is not special": even a process that became inside
         * uid 0 again would get no capabilities from execve. */
        unsigned long bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
                             SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED | SECBIT_KEEP_CAPS_LOCKED;
        if (prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) < 0)
                return brig_err(err, errno, "set securebits");
        return 0;
}

int caps_drop_all(brig_error **err)
{
        struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
        struct __user_cap_data_struct data[2] = { 0 };
        if (syscall(SYS_capset, &hdr, data) < 0)
                return brig_err(err, errno, "capset: drop effective, permitted and inheritable");
        /* Never gain privileges through execve: setuid bits and file caps
         * are ignored from here on, for this process and its children. */
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return brig_err(err, errno, "PR_SET_NO_NEW_PRIVS");
        return caps_verify_none(err);
}

int caps_verify_none(brig_error **err)
{
        struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
        struct __user_cap_data_struct data[2] = { 0 };
        if (syscall(SYS_capget, &hdr, data) < 0)
                return brig_err(err, errno, "capget");
        for (int i = 0; i < 2; i++)
                if (data[i].effective || data[i].permitted || data[i].inheritable)
                        return brig_err(err, EPERM, "capabilities still held after dropping them");
        int cap = 0, held;
        while (cap < CAP_WALK_MAX && (held = prctl(PR_CAPBSET_READ, cap, 0, 0, 0)) >= 0) {
                if (held > 0)
                        return brig_err(err, EPERM, "capability %d still in the bounding set", cap);
                cap++;
        }
        if (cap == CAP_WALK_MAX || errno != EINVAL || cap == 0)
                return brig_err(err, cap == CAP_WALK_MAX ? E2BIG : errno, "read capability %d of the bounding set",
                                cap);
        if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
                return brig_err(err, EPERM, "no_new_privs is not set");
        return 0;
}
