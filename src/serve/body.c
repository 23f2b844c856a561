/* body.c — what a request carries, checked before a handler uses it: JSON
 * bodies held to the fields each route takes (an unknown field is refused
 * by name, not ignored: a misspelt "timout_ms" would otherwise run the
 * command without a timeout), base64, signals, modes. Pure (no I/O):
 * tests/fuzz/fuzz_serve.c feeds it. */
#define _GNU_SOURCE
#include "serve.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

static bool type_fits(json_t *v, enum field_type t)
{
        switch (t) {
        case F_STRING:
                return json_is_string(v);
        case F_BOOL:
                return json_is_boolean(v);
        case F_INT:
                return json_is_integer(v) && json_integer_value(v) >= 0;
        case F_OBJECT:
                return json_is_object(v);
        case F_ARRAY_STRINGS: {
                if (!json_is_array(v))
                        return false;
                size_t i;
                json_t *e;
                json_array_foreach(v, i, e)
                        if (!json_is_string(e))
                                return false;
                return true;
        }
        case F_OBJECT_STRINGS: {
                if (!json_is_object(v))
                        return false;
                const char *k;
                json_t *e;
                json_object_foreach(v, k, e)
                        if (!json_is_string(e))
                                return false;
                return true;
        }
        case F_ANY:
                return true;
        }
        return false;
}

static const char *type_name(enum field_type t)
{
        static const char *const names[] = { "a string", "true or false", "a non-negative integer", "an object",
                                             "an array of strings", "an object of strings", "any value" };
        return names[t];
}

json_t *body_parse(const char *body, size_t len, bool allow_empty, const struct field *fields, const char **code,
                   const char **field, char *msg, size_t msg_size)
{
        *code = NULL;
        *field = NULL;
        if (len == 0 && allow_empty)
                return json_object();
        json_error_t je;
        /* JSON_REJECT_DUPLICATES: {"argv":[..], "argv":[..]} is not two answers to one question */
        json_t *doc = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &je);
        if (!doc) {
                *code = "invalid_json";
                snprintf(msg, msg_size, "the body is not JSON: line %d, column %d: %s", je.line, je.column, je.text);
                return NULL;
        }
        if (!json_is_object(doc)) {
                json_decref(doc);
                *code = "invalid_json";
                snprintf(msg, msg_size, "the body must be a JSON object");
                return NULL;
        }
        const char *k;
        json_t *v;
        json_object_foreach(doc, k, v) {
                const struct field *f = fields;
                while (f && f->name && strcmp(f->name, k) != 0)
                        f++;
                if (!f || !f->name) {
                        *code = "unknown_field";
                        *field = k;
                        snprintf(msg, msg_size, "unknown field '%.64s' in the body", k);
                        goto fail;
                }
                if (!json_is_null(v) && !type_fits(v, f->type)) {
                        *code = "bad_field";
                        *field = f->name;
                        snprintf(msg, msg_size, "field '%s' must be %s", f->name, type_name(f->type));
                        goto fail;
                }
        }
        for (const struct field *f = fields; f && f->name; f++)
                if (f->required && !json_object_get(doc, f->name)) {
                        *code = "bad_field";
                        *field = f->name;
                        snprintf(msg, msg_size, "field '%s' is required", f->name);
                        goto fail;
                }
        return doc;
fail:
        /* *field may point into doc: hand it back through a static copy */
        {
                static __thread char name[72];
                snprintf(name, sizeof name, "%s", *field);
                *field = name;
        }
        json_decref(doc);
        return NULL;
}

static const char b64chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *b64_encode(const void *data, size_t len)
{
        const unsigned char *d = data;
        char *out = malloc(4 * ((len + 2) / 3) + 1);
        if (!out)
                return NULL;
        char *o = out;
        size_t i = 0;
        for (; i + 2 < len; i += 3) {
                *o++ = b64chars[d[i] >> 2];
                *o++ = b64chars[((d[i] & 3) << 4) | (d[i + 1] >> 4)];
                *o++ = b64chars[((d[i + 1] & 15) << 2) | (d[i + 2] >> 6)];
                *o++ = b64chars[d[i + 2] & 63];
        }
        if (i < len) {
                *o++ = b64chars[d[i] >> 2];
                if (i + 1 < len) {
                        *o++ = b64chars[((d[i] & 3) << 4) | (d[i + 1] >> 4)];
                        *o++ = b64chars[(d[i + 1] & 15) << 2];
                } else {
                        *o++ = b64chars[(d[i] & 3) << 4];
                        *o++ = '=';
                }
                *o++ = '=';
        }
        *o = '\0';
        return out;
}

static int b64_value(char c)
{
        const char *p = c ? strchr(b64chars, c) : NULL;
        return p ? (int)(p - b64chars) : -1;
}

ssize_t b64_decode(const char *text, size_t len, char **out)
{
        *out = NULL;
        if (len % 4)
                return -1;
        unsigned char *buf = malloc(len / 4 * 3 + 1);
        if (!buf)
                return -1;
        size_t n = 0;
        for (size_t i = 0; i < len; i += 4) {
                int v[4];
                int pad = 0;
                for (int j = 0; j < 4; j++) {
                        char c = text[i + j];
                        /* '=' only at the end, at most two */
                        if (c == '=' && i + 4 == len && j >= 2 && (j == 3 || text[i + 3] == '=')) {
                                v[j] = 0;
                                pad++;
                        } else if ((v[j] = b64_value(c)) < 0) {
                                free(buf);
                                return -1;
                        }
                }
                /* the bits padding leaves over are zero: one spelling per byte string */
                if ((pad == 1 && (v[2] & 3)) || (pad == 2 && (v[1] & 15))) {
                        free(buf);
                        return -1;
                }
                buf[n++] = (unsigned char)(v[0] << 2 | v[1] >> 4);
                if (pad < 2)
                        buf[n++] = (unsigned char)((v[1] & 15) << 4 | v[2] >> 2);
                if (pad < 1)
                        buf[n++] = (unsigned char)((v[2] & 3) << 6 | v[3]);
        }
        *out = (char *)buf;
        return (ssize_t)n;
}

/* The length of the valid UTF-8 sequence at s (1..4), or 0. */
static size_t utf8_len(const unsigned char *s, size_t left)
{
        unsigned char c = s[0];
        size_t n;
        uint32_t cp;
        if (c < 0x80)
                return 1;
        if (c >= 0xc2 && c <= 0xdf)
                n = 2, cp = c & 0x1f;
        else if (c >= 0xe0 && c <= 0xef)
                n = 3, cp = c & 0x0f;
        else if (c >= 0xf0 && c <= 0xf4)
                n = 4, cp = c & 0x07;
        else
                return 0;
        if (left < n)
                return 0;
        for (size_t i = 1; i < n; i++) {
                if ((s[i] & 0xc0) != 0x80)
                        return 0;
                cp = cp << 6 | (s[i] & 0x3f);
        }
        /* overlong, surrogates, past U+10FFFF */
        if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        return n;
}

json_t *json_text_of_bytes(const char *data, size_t len)
{
        /* at most 3 bytes (U+FFFD) for each byte in */
        char *text = malloc(len * 3 + 1);
        if (!text)
                return NULL;
        size_t o = 0;
        for (size_t i = 0; i < len;) {
                size_t n = utf8_len((const unsigned char *)data + i, len - i);
                if (n == 0 || data[i] == '\0') {
                        /* NUL passes as U+FFFD too: the string is a C string for jansson */
                        memcpy(text + o, "\xef\xbf\xbd", 3);
                        o += 3;
                        i++;
                        continue;
                }
                memcpy(text + o, data + i, n);
                o += n;
                i += n;
        }
        json_t *s = json_stringn(text, o);
        free(text);
        return s;
}

int signal_parse(json_t *v)
{
        if (json_is_integer(v)) {
                json_int_t n = json_integer_value(v);
                return n >= 1 && n <= 64 ? (int)n : -1;
        }
        if (!json_is_string(v))
                return -1;
        const char *s = json_string_value(v);
        if (strncasecmp(s, "SIG", 3) == 0)
                s += 3;
        static const struct {
                const char *name;
                int sig;
        } names[] = { { "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT }, { "KILL", SIGKILL },
                      { "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "TERM", SIGTERM }, { "CONT", SIGCONT },
                      { "STOP", SIGSTOP }, { "TSTP", SIGTSTP }, { "WINCH", SIGWINCH }, { "ALRM", SIGALRM },
                      { "PIPE", SIGPIPE } };
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
                if (strcasecmp(s, names[i].name) == 0)
                        return names[i].sig;
        char *end;
        long n = strtol(s, &end, 10);
        return *s && !*end && n >= 1 && n <= 64 ? (int)n : -1;
}

int mode_parse(const char *s)
{
        if (!s || !*s || strlen(s) > 5)
                return -1;
        int m = 0;
        for (const char *c = s; *c; c++) {
                if (*c < '0' || *c > '7')
                        return -1;
                m = m * 8 + (*c - '0');
        }
        return m <= 07777 ? m : -1;
}
