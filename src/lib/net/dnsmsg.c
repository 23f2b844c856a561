/* dnsmsg.c — the DNS messages of brig's stub resolver (filtered mode).
 *
 * The stub answers questions from inside the sandbox: one question per
 * query, A and AAAA answered with addresses brig hands out, everything
 * else with an empty answer or NXDOMAIN. Only what that needs is parsed;
 * anything else gets FORMERR or NOTIMP. c-ares (Debian 12's 1.18) can
 * build queries but not parse one or build a response, hence these few
 * lines. Pure functions over untrusted memory; fuzzed (fuzz_dns.c). */
#define _GNU_SOURCE
#include "net/net.h"

#include <stdio.h>
#include <string.h>

#define DNS_HEADER 12
#define DNS_FLAG_QR 0x8000
#define DNS_FLAG_AA 0x0400
#define DNS_FLAG_TC 0x0200
#define DNS_FLAG_RD 0x0100
#define DNS_FLAG_RA 0x0080
#define DNS_OPCODE(f) (((f) >> 11) & 0xf)

static unsigned get16(const uint8_t *p)
{
        return (unsigned)p[0] << 8 | p[1];
}

static void put16(uint8_t *p, unsigned v)
{
        p[0] = (uint8_t)(v >> 8);
        p[1] = (uint8_t)v;
}

int dns_parse_query(const uint8_t *buf, size_t len, struct dns_question *q)
{
        memset(q, 0, sizeof *q);
        if (len < DNS_HEADER)
                return DNS_DROP;
        q->id = (uint16_t)get16(buf);
        q->flags = (uint16_t)get16(buf + 2);
        if (q->flags & DNS_FLAG_QR)
                return DNS_DROP;  /* a response sent to us: never answer it (no loops) */
        if (DNS_OPCODE(q->flags) != 0)
                return -DNS_RCODE_NOTIMP;
        if (get16(buf + 4) != 1)
                return -DNS_RCODE_FORMERR;  /* exactly one question, as every resolver sends */
        size_t off = DNS_HEADER, out = 0;
        for (;;) {
                if (off >= len)
                        return -DNS_RCODE_FORMERR;
                unsigned l = buf[off++];
                if (l == 0)
                        break;
                if (l > 63)
                        return -DNS_RCODE_FORMERR;  /* compression pointers have no place in a question */
                if (len - off < l || out + l > EGRESS_HOST_MAX)  /* 253 characters, the dot after the last not counted */
                        return -DNS_RCODE_FORMERR;
                for (unsigned i = 0; i < l; i++) {
                        char c = (char)buf[off + i];
                        /* a label with a dot or a NUL inside would be read
                         * as another name: refused, never reinterpreted */
                        if (c == '.' || c == '\0')
                                return -DNS_RCODE_FORMERR;
                        q->name[out++] = c;
                }
                q->name[out++] = '.';
                off += l;
        }
        if (out)
                out--;  /* no trailing dot */
        q->name[out] = '\0';
        if (len - off < 4)
                return -DNS_RCODE_FORMERR;
        q->qtype = (uint16_t)get16(buf + off);
        q->qclass = (uint16_t)get16(buf + off + 2);
        off += 4;
        q->question = buf + DNS_HEADER;
        q->question_len = off - DNS_HEADER;
        return 0;
}

size_t dns_build_reply(const struct dns_question *q, int rcode, const struct net_addr *addrs, size_t n, uint32_t ttl,
                       uint8_t *out, size_t cap)
{
        size_t need = DNS_HEADER + q->question_len;
        if (cap < DNS_HEADER)
                return 0;
        bool truncated = cap < need;
        if (truncated)
                need = DNS_HEADER;  /* no room for the question: a bare header, marked truncated */
        memset(out, 0, DNS_HEADER);
        put16(out, q->id);
        put16(out + 2, DNS_FLAG_QR | DNS_FLAG_AA | DNS_FLAG_RA | (q->flags & DNS_FLAG_RD) | (truncated ? DNS_FLAG_TC : 0) |
                               ((unsigned)rcode & 0xf));
        size_t off = DNS_HEADER;
        if (need > DNS_HEADER) {
                put16(out + 4, 1);
                memcpy(out + off, q->question, q->question_len);
                off += q->question_len;
        }
        size_t answers = 0;
        for (size_t i = 0; need > DNS_HEADER && rcode == DNS_RCODE_NOERROR && i < n; i++) {
                bool v4 = addrs[i].family == AF_INET;
                size_t rdlen = v4 ? 4 : 16;
                if (cap - off < 12 + rdlen) {
                        /* does not fit (UDP's 512 bytes): say truncated, the
                         * client asks again over TCP */
                        put16(out + 2, get16(out + 2) | DNS_FLAG_TC);
                        break;
                }
                put16(out + off, 0xc000 | DNS_HEADER);  /* the name: a pointer to the question */
                put16(out + off + 2, v4 ? DNS_TYPE_A : DNS_TYPE_AAAA);
                put16(out + off + 4, DNS_CLASS_IN);
                put16(out + off + 6, ttl >> 16);
                put16(out + off + 8, ttl & 0xffff);
                put16(out + off + 10, (unsigned)rdlen);
                memcpy(out + off + 12, v4 ? addrs[i].b + 12 : addrs[i].b, rdlen);
                off += 12 + rdlen;
                answers++;
        }
        put16(out + 6, (unsigned)answers);
        return off;
}

const char *dns_type_name(uint16_t type, char buf[8])
{
        switch (type) {
        case DNS_TYPE_A: return "A";
        case DNS_TYPE_AAAA: return "AAAA";
        case 5: return "CNAME";
        case 12: return "PTR";
        case 15: return "MX";
        case 16: return "TXT";
        case 33: return "SRV";
        case 64: return "SVCB";
        case 65: return "HTTPS";
        default:
                snprintf(buf, 8, "%u", type);
                return buf;
        }
}
