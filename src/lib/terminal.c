/* terminal.c — a pseudo-terminal between the caller's terminal and the
 * sandbox. The pty lives in the sandbox's own devpts instance, so `tty`
 * names it and nothing of the host's terminals is visible; the command
 * gets the slave as its controlling terminal, so shells have job control,
 * and never the caller's terminal, so TIOCSTI can inject keystrokes only
 * into its own pty. The supervisor holds the master and relays bytes. */
#define _GNU_SOURCE
#include "internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>

struct terminal {
        int master;            /* -1 until the sandbox sends it */
        bool restore;          /* the caller's terminal is in raw mode */
        struct termios saved;
        bool have_saved;
};

int terminal_prepare(enum brig_tty_mode mode, struct terminal **ret, brig_error **err)
{
        *ret = NULL;
        bool in_tty = isatty(STDIN_FILENO), out_tty = isatty(STDOUT_FILENO);
        if (mode == BRIG_TTY_NEVER || (mode == BRIG_TTY_AUTO && !(in_tty && out_tty)))
                return 0;
        struct terminal *t = calloc(1, sizeof *t);
        if (!t)
                return brig_err(err, ENOMEM, "terminal");
        t->master = -1;
        t->have_saved = in_tty && tcgetattr(STDIN_FILENO, &t->saved) == 0;
        *ret = t;
        return 0;
}

int terminal_create_inside(int *master, int *slave, brig_error **err)
{
        _cleanup_close_ int m = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (m < 0)
                return brig_err(err, errno, "open /dev/ptmx");
        if (unlockpt(m) < 0)
                return brig_err(err, errno, "unlockpt");
        /* TIOCGPTPEER opens the slave through the master, not by a path
         * that could be raced (ioctl_tty(2)). */
        int s = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (s < 0)
                return brig_err(err, errno, "open the pty slave");
        *master = TAKE_FD(m);
        *slave = s;
        return 0;
}

void terminal_attach(struct terminal *t, int master)
{
        closep(&t->master);
        t->master = master;
        if (t->have_saved) {
                (void)tcsetattr(master, TCSANOW, &t->saved);  /* the caller's line settings */
                struct termios raw = t->saved;
                cfmakeraw(&raw);
                if (tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0)
                        t->restore = true;
        }
        terminal_on_winch(t);
}

int terminal_master_fd(const struct terminal *t)
{
        return t->master;
}

void terminal_on_winch(struct terminal *t)
{
        struct winsize ws;
        if (t->master < 0)
                return;
        if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 || ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0)
                (void)ioctl(t->master, TIOCSWINSZ, &ws);  /* the kernel sends SIGWINCH inside */
}

static bool write_all(int fd, const char *buf, size_t n)
{
        while (n > 0) {
                ssize_t w = write(fd, buf, n);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        return false;
                buf += w;
                n -= (size_t)w;
        }
        return true;
}

bool terminal_relay_out(struct terminal *t)
{
        char buf[16384];
        ssize_t n = read(t->master, buf, sizeof buf);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
                return true;
        if (n <= 0)
                return false;  /* EIO: every slave fd is closed */
        (void)write_all(STDOUT_FILENO, buf, (size_t)n);
        return true;
}

bool terminal_relay_in(struct terminal *t)
{
        char buf[4096];
        ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
                return true;
        if (n <= 0)
                return false;
        return write_all(t->master, buf, (size_t)n);
}

void terminal_close(struct terminal *t)
{
        if (!t)
                return;
        if (t->restore)
                (void)tcsetattr(STDIN_FILENO, TCSADRAIN, &t->saved);
        closep(&t->master);
        free(t);
}
