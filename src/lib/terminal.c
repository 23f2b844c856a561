/* terminal.c — a pseudo-terminal between the caller's terminal and the
 * sandbox. The command gets the slave as its controlling terminal, so
 * shells have job control; it never gets the caller's terminal, so
 * TIOCSTI can inject keystrokes only into its own pty. */
#define _GNU_SOURCE
#include "internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>

struct terminal {
        int master;
        bool restore;          /* caller's terminal is in raw mode */
        struct termios saved;
        bool stdin_open;
};

int terminal_open(enum brig_tty_mode mode, struct terminal **ret, int *slave_fd, brig_error **err)
{
        *ret = NULL;
        *slave_fd = -1;
        bool in_tty = isatty(STDIN_FILENO), out_tty = isatty(STDOUT_FILENO);
        if (mode == BRIG_TTY_NEVER || (mode == BRIG_TTY_AUTO && !(in_tty && out_tty)))
                return 0;
        struct terminal *t = calloc(1, sizeof *t);
        if (!t)
                return brig_err(err, ENOMEM, "terminal");
        t->stdin_open = true;
        t->master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (t->master < 0) {
                free(t);
                return brig_err(err, errno, "open a pseudo-terminal");
        }
        char name[128];
        if (grantpt(t->master) < 0 || unlockpt(t->master) < 0 || ptsname_r(t->master, name, sizeof name) != 0) {
                int e = errno;
                terminal_close(t);
                return brig_err(err, e, "set up the pseudo-terminal");
        }
        int slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (slave < 0) {
                int e = errno;
                terminal_close(t);
                return brig_err(err, e, "open %s", name);
        }
        struct termios tio;
        if (in_tty && tcgetattr(STDIN_FILENO, &tio) == 0) {
                (void)tcsetattr(slave, TCSANOW, &tio);  /* same line settings as the caller's */
                t->saved = tio;
                struct termios raw = tio;
                cfmakeraw(&raw);
                if (tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0)
                        t->restore = true;
        }
        terminal_on_winch(t);
        *ret = t;
        *slave_fd = slave;
        return 0;
}

int terminal_master_fd(const struct terminal *t)
{
        return t->master;
}

void terminal_on_winch(struct terminal *t)
{
        struct winsize ws;
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
        if (n <= 0) {
                t->stdin_open = false;
                return false;
        }
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
