/* files.c — the files routes: every one is brig_sandbox_file, run inside
 * the sandbox as the sandbox user (docs/api.md), so a path or a symlink
 * planted inside resolves in the sandbox's view only; the server never
 * resolves a path on the host. The data travels through a memfd. */
#define _GNU_SOURCE
#include "serve.h"

#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

static int memfd_with(const char *data, size_t len)
{
        int fd = memfd_create("brig-serve-file", MFD_CLOEXEC);
        if (fd < 0)
                return -errno;
        for (size_t off = 0; off < len;) {
                ssize_t n = write(fd, data + off, len - off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        int e = n < 0 ? errno : EIO;
                        close(fd);
                        return -e;
                }
                off += (size_t)n;
        }
        if (lseek(fd, 0, SEEK_SET) < 0) {
                int e = errno;
                close(fd);
                return -e;
        }
        return fd;
}

static char *memfd_text(int fd)
{
        struct stat st;
        if (fstat(fd, &st) < 0 || st.st_size > 64 * 1024 * 1024)
                return NULL;
        char *buf = malloc((size_t)st.st_size + 1);
        if (!buf)
                return NULL;
        ssize_t n = pread(fd, buf, (size_t)st.st_size, 0);
        if (n < 0) {
                free(buf);
                return NULL;
        }
        buf[n] = '\0';
        return buf;
}

/* The data of fd as the answer (MHD sends it from the descriptor). */
static int reply_fd(struct req *r, int fd, const char *ctype)
{
        struct stat st;
        if (fstat(fd, &st) < 0) {
                close(fd);
                return reply_error(r, 500, "internal", NULL, "the file's data: %s", strerror(errno));
        }
        struct MHD_Response *resp = MHD_create_response_from_fd((uint64_t)st.st_size, fd);
        if (!resp) {
                close(fd);
                return MHD_NO;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
        int ret = MHD_queue_response(r->conn, 200, resp);
        MHD_destroy_response(resp);
        r->answered = true;
        return ret;
}

int handle_files(struct req *r)
{
        if (!sandbox_visible(r))
                return MHD_YES;
        const char *path = req_query(r, "path");
        if (!path || !*path)
                return reply_error(r, 400, "bad_field", json_pack("{s:s}", "field", "path"),
                                   "the query needs path=ABSOLUTE_PATH (inside the sandbox)");
        if (path[0] != '/')
                return reply_error(r, 400, "bad_field", json_pack("{s:s}", "field", "path"),
                                   "path '%.200s': an absolute path inside the sandbox", path);
        const char *qmode = req_query(r, "mode");
        int mode = qmode ? mode_parse(qmode) : 0;
        if (mode < 0)
                return reply_error(r, 400, "bad_field", json_pack("{s:s}", "field", "mode"),
                                   "mode '%.20s': octal permission bits (0644)", qmode);
        /* what travels goes through a memfd, in memory: --max-body bounds it both ways */
        brig_file_spec f = { .size = sizeof f, .path = path, .fd = -1, .mode = (uint32_t)mode,
                             .max_bytes = serve_cfg.max_body };
        const char *ctype = "application/json", *what = "file";
        bool data_out = false, data_in = false;
        switch (r->route) {
        case R_FILE_READ:
                f.op = BRIG_FILE_READ, data_out = true, ctype = "application/octet-stream", what = "read";
                break;
        case R_FILE_WRITE:
                f.op = BRIG_FILE_WRITE, data_in = true, what = "write";
                break;
        case R_FILE_REMOVE:
                f.op = BRIG_FILE_REMOVE, what = "remove";
                break;
        case R_FILE_LIST:
                f.op = BRIG_FILE_LIST, data_out = true, what = "list";
                break;
        case R_FILE_STAT:
                f.op = BRIG_FILE_STAT, data_out = true, what = "stat";
                break;
        case R_FILE_MKDIR:
                f.op = BRIG_FILE_MKDIR, what = "mkdir";
                break;
        case R_TAR_OUT:
                f.op = BRIG_FILE_TAR_OUT, data_out = true, ctype = "application/x-tar", what = "tar download";
                break;
        case R_TAR_IN:
                f.op = BRIG_FILE_TAR_IN, data_in = true, what = "tar upload";
                break;
        default:
                return reply_error(r, 500, "internal", NULL, "files: route %d", r->route);
        }
        brig_sandbox *sb = NULL;
        if (sandbox_open_running(r, &sb) < 0)
                return MHD_YES;
        _serve_close_ int fd = data_in ? memfd_with(r->body, r->body_len)
                                       : data_out ? memfd_create("brig-serve-file", MFD_CLOEXEC) : -1;
        if ((data_in || data_out) && fd < 0) {
                brig_sandbox_close(sb, NULL);
                return reply_error(r, 500, "internal", NULL, "memfd: %s", strerror(errno));
        }
        f.fd = fd;
        brig_error *e = NULL;
        int rc = brig_sandbox_file(sb, &f, &e);
        brig_sandbox_close(sb, NULL);
        if (rc < 0)
                return reply_brig(r, rc, e, what);
        switch (f.op) {
        case BRIG_FILE_READ:
        case BRIG_FILE_TAR_OUT: {
                int out = fd;
                fd = -1;  /* the answer owns it now */
                return reply_fd(r, out, ctype);
        }
        case BRIG_FILE_LIST:
        case BRIG_FILE_STAT: {
                _serve_free_ char *text = memfd_text(fd);
                json_t *doc = text ? json_loads(text, 0, NULL) : NULL;
                if (!doc)
                        return reply_error(r, 500, "internal", NULL, "%s: the sandbox's answer is not JSON", what);
                if (f.op == BRIG_FILE_LIST)
                        doc = json_pack("{s:s, s:o}", "path", path, "entries", doc);
                return reply_json(r, 200, doc);
        }
        case BRIG_FILE_WRITE:
                return reply_json(r, 200, json_pack("{s:s, s:I}", "path", path, "bytes", (json_int_t)r->body_len));
        default:
                return reply_json(r, 200, json_pack("{s:s}", "path", path));
        }
}
