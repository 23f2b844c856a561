/* nftgen.c — a build tool, not part of brig: filtered mode's nftables
 * rules (netfilter.c says what they do) built through libnftnl + libmnl
 * into the one nfnetlink batch the kernel is sent, written out as a C
 * header (nft_batch.h) that netfilter.c sends as it is.
 *
 * The rules depend on nothing of a run: not the policy, not the host (the
 * stub's and the transparent proxy's ports are constants, every family's
 * rule is made and IPv6 off in a kernel changes no rule). Built at each
 * start they cost libnftnl and libmnl, about 0.17 ms of loading and
 * relocating in every brig process (docs/benchmarks.md), to make the same
 * bytes every time; so they are made once, here, by the same library
 * calls, and brig links neither library.
 *
 * Only the last rule asks for an ack: the kernel answers an error of any
 * message whatever its flags, after the whole batch, in order, and a
 * failed commit before them (nfnetlink_rcv_batch), so one read tells
 * success instead of one per message.
 *
 *   brig-nftgen OUT.h */
#define _GNU_SOURCE
#include "net/egress.h"

#include <arpa/inet.h>
#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/table.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef ARRAY_SIZE
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#endif

#define TABLE "brig"
#define NAT_PRIORITY (-100)   /* NF_IP_PRI_NAT_DST */
#define FILTER_PRIORITY 0

struct batch {
        struct mnl_nlmsg_batch *b;
        char buf[64 * 1024];
        uint32_t seq;
        struct nlmsghdr *last;  /* the last rule: the one that asks for an ack */
        bool oom;
};

static struct nlmsghdr *next_hdr(struct batch *bt, uint16_t type, uint16_t flags)
{
        struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(mnl_nlmsg_batch_current(bt->b), type, NFPROTO_INET, flags,
                                                     bt->seq++);
        bt->last = nlh;
        return nlh;
}

static void end_msg(struct batch *bt)
{
        if (!mnl_nlmsg_batch_next(bt->b))
                bt->oom = true;  /* 64 KiB is far more than these rules need */
}

/* ---- expressions ----------------------------------------------------------- */

static void add_expr(struct nftnl_rule *r, struct nftnl_expr *e)
{
        if (e)
                nftnl_rule_add_expr(r, e);
}

static struct nftnl_expr *meta(enum nft_meta_keys key)
{
        struct nftnl_expr *e = nftnl_expr_alloc("meta");
        if (e) {
                nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
                nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, NFT_REG_1);
        }
        return e;
}

static struct nftnl_expr *cmp(enum nft_cmp_ops op, const void *data, size_t len)
{
        struct nftnl_expr *e = nftnl_expr_alloc("cmp");
        if (e) {
                nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
                nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, op);
                nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, (uint32_t)len);
        }
        return e;
}

static struct nftnl_expr *payload(enum nft_payload_bases base, uint32_t offset, uint32_t len)
{
        struct nftnl_expr *e = nftnl_expr_alloc("payload");
        if (e) {
                nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, base);
                nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, offset);
                nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, len);
                nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, NFT_REG_1);
        }
        return e;
}

static struct nftnl_expr *mask(const void *m, size_t len)
{
        static const uint8_t zero[16];
        struct nftnl_expr *e = nftnl_expr_alloc("bitwise");
        if (e) {
                nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, NFT_REG_1);
                nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, NFT_REG_1);
                nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, (uint32_t)len);
                nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK, m, (uint32_t)len);
                nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR, zero, (uint32_t)len);
        }
        return e;
}

static struct nftnl_expr *redirect_to(uint16_t port)
{
        uint16_t be = htons(port);
        struct nftnl_expr *imm = nftnl_expr_alloc("immediate");
        if (imm) {
                nftnl_expr_set_u32(imm, NFTNL_EXPR_IMM_DREG, NFT_REG_1);
                nftnl_expr_set(imm, NFTNL_EXPR_IMM_DATA, &be, sizeof be);
        }
        return imm;
}

static struct nftnl_expr *redir(void)
{
        struct nftnl_expr *e = nftnl_expr_alloc("redir");
        if (e)
                nftnl_expr_set_u32(e, NFTNL_EXPR_REDIR_REG_PROTO_MIN, NFT_REG_1);
        return e;
}

static struct nftnl_expr *verdict(int v)
{
        struct nftnl_expr *e = nftnl_expr_alloc("immediate");
        if (e) {
                nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
                nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, (uint32_t)v);
        }
        return e;
}

static struct nftnl_expr *reject(uint32_t type, uint8_t code)
{
        struct nftnl_expr *e = nftnl_expr_alloc("reject");
        if (e) {
                nftnl_expr_set_u32(e, NFTNL_EXPR_REJECT_TYPE, type);
                nftnl_expr_set_u8(e, NFTNL_EXPR_REJECT_CODE, code);
        }
        return e;
}

/* ---- the conditions the rules share ---------------------------------------- */

static void match_l4(struct nftnl_rule *r, uint8_t proto)
{
        add_expr(r, meta(NFT_META_L4PROTO));
        add_expr(r, cmp(NFT_CMP_EQ, &proto, 1));
}

static void match_dport(struct nftnl_rule *r, uint8_t proto, uint16_t port)
{
        uint16_t be = htons(port);
        match_l4(r, proto);
        add_expr(r, payload(NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2));  /* the destination port, TCP and UDP alike */
        add_expr(r, cmp(NFT_CMP_EQ, &be, sizeof be));
}

/* The destination is (op EQ) or is not (op NEQ) this family's loopback. */
static void match_loopback(struct nftnl_rule *r, uint8_t family, enum nft_cmp_ops op)
{
        add_expr(r, meta(NFT_META_NFPROTO));
        add_expr(r, cmp(NFT_CMP_EQ, &family, 1));
        if (family == NFPROTO_IPV4) {
                static const uint8_t net8[4] = { 255, 0, 0, 0 }, lo[4] = { 127, 0, 0, 0 };
                add_expr(r, payload(NFT_PAYLOAD_NETWORK_HEADER, 16, 4));  /* daddr */
                add_expr(r, mask(net8, 4));
                add_expr(r, cmp(op, lo, 4));
        } else {
                static const struct in6_addr lo = IN6ADDR_LOOPBACK_INIT;
                add_expr(r, payload(NFT_PAYLOAD_NETWORK_HEADER, 24, 16));  /* daddr */
                add_expr(r, cmp(op, &lo, 16));
        }
}

/* ---- the table ----------------------------------------------------------- */

static struct nftnl_rule *rule_new(const char *chain)
{
        struct nftnl_rule *r = nftnl_rule_alloc();
        if (r) {
                nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, NFPROTO_INET);
                nftnl_rule_set_str(r, NFTNL_RULE_TABLE, TABLE);
                nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, chain);
        }
        return r;
}

static void put_rule(struct batch *bt, struct nftnl_rule *r)
{
        if (!r) {
                bt->oom = true;
                return;
        }
        struct nlmsghdr *nlh = next_hdr(bt, NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND);
        nftnl_rule_nlmsg_build_payload(nlh, r);
        nftnl_rule_free(r);
        end_msg(bt);
}

static void put_chain(struct batch *bt, const char *name, const char *type, int priority)
{
        struct nftnl_chain *c = nftnl_chain_alloc();
        if (!c) {
                bt->oom = true;
                return;
        }
        nftnl_chain_set_u32(c, NFTNL_CHAIN_FAMILY, NFPROTO_INET);
        nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, TABLE);
        nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, name);
        nftnl_chain_set_str(c, NFTNL_CHAIN_TYPE, type);
        nftnl_chain_set_u32(c, NFTNL_CHAIN_HOOKNUM, NF_INET_LOCAL_OUT);
        nftnl_chain_set_s32(c, NFTNL_CHAIN_PRIO, priority);
        nftnl_chain_set_u32(c, NFTNL_CHAIN_POLICY, NF_ACCEPT);
        struct nlmsghdr *nlh = next_hdr(bt, NFT_MSG_NEWCHAIN, NLM_F_CREATE);
        nftnl_chain_nlmsg_build_payload(nlh, c);
        nftnl_chain_free(c);
        end_msg(bt);
}

static void build(struct batch *bt)
{
        struct nftnl_table *t = nftnl_table_alloc();
        if (!t) {
                bt->oom = true;
                return;
        }
        nftnl_table_set_u32(t, NFTNL_TABLE_FAMILY, NFPROTO_INET);
        nftnl_table_set_str(t, NFTNL_TABLE_NAME, TABLE);
        nftnl_table_nlmsg_build_payload(next_hdr(bt, NFT_MSG_NEWTABLE, NLM_F_CREATE), t);
        nftnl_table_free(t);
        end_msg(bt);

        put_chain(bt, "redirect", "nat", NAT_PRIORITY);
        static const uint8_t l4[] = { IPPROTO_UDP, IPPROTO_TCP };
        for (size_t i = 0; i < ARRAY_SIZE(l4); i++) {
                struct nftnl_rule *r = rule_new("redirect");
                if (r) {
                        match_dport(r, l4[i], 53);
                        add_expr(r, redirect_to(BRIG_DNS_PORT));
                        add_expr(r, redir());
                }
                put_rule(bt, r);
        }
        static const uint8_t families[] = { NFPROTO_IPV4, NFPROTO_IPV6 };
        for (size_t i = 0; i < ARRAY_SIZE(families); i++) {
                struct nftnl_rule *r = rule_new("redirect");
                if (r) {
                        match_loopback(r, families[i], NFT_CMP_NEQ);
                        match_l4(r, IPPROTO_TCP);
                        add_expr(r, redirect_to(BRIG_TRANSPARENT_PORT));
                        add_expr(r, redir());
                }
                put_rule(bt, r);
        }

        put_chain(bt, "guard", "filter", FILTER_PRIORITY);
        for (size_t i = 0; i < ARRAY_SIZE(families); i++) {
                struct nftnl_rule *r = rule_new("guard");
                if (r) {
                        match_loopback(r, families[i], NFT_CMP_EQ);
                        add_expr(r, verdict(NF_ACCEPT));
                }
                put_rule(bt, r);
        }
        struct nftnl_rule *r = rule_new("guard");
        if (r) {
                match_l4(r, IPPROTO_TCP);
                add_expr(r, reject(NFT_REJECT_TCP_RST, 0));
        }
        put_rule(bt, r);
        r = rule_new("guard");
        if (r)
                add_expr(r, reject(NFT_REJECT_ICMPX_UNREACH, NFT_REJECT_ICMPX_ADMIN_PROHIBITED));
        put_rule(bt, r);
}

int main(int argc, char **argv)
{
        if (argc != 2) {
                fprintf(stderr, "usage: brig-nftgen OUT.h\n");
                return 2;
        }
        static struct batch bt;
        bt.b = mnl_nlmsg_batch_start(bt.buf, sizeof bt.buf);
        nftnl_batch_begin(mnl_nlmsg_batch_current(bt.b), bt.seq++);
        mnl_nlmsg_batch_next(bt.b);
        build(&bt);
        if (bt.oom || !bt.last) {
                fprintf(stderr, "brig-nftgen: out of memory building the rules\n");
                return 1;
        }
        bt.last->nlmsg_flags |= NLM_F_ACK;
        uint32_t last_seq = bt.last->nlmsg_seq;
        nftnl_batch_end(mnl_nlmsg_batch_current(bt.b), bt.seq++);
        mnl_nlmsg_batch_next(bt.b);
        const unsigned char *p = mnl_nlmsg_batch_head(bt.b);
        size_t n = mnl_nlmsg_batch_size(bt.b);
        FILE *f = fopen(argv[1], "w");
        if (!f) {
                perror(argv[1]);
                return 1;
        }
        fprintf(f, "/* nft_batch.h — made by brig-nftgen (src/lib/net/nftgen.c) at build time: do not edit. */\n"
                   "#define NFT_BATCH_ACK_SEQ %uu  /* the one message that asks for an ack */\n"
                   "static const unsigned char nft_batch[%zu] __attribute__((aligned(4))) = {",
                last_seq, n);
        for (size_t i = 0; i < n; i++)
                fprintf(f, "%s0x%02x,", i % 12 ? " " : "\n        ", p[i]);
        fprintf(f, "\n};\n");
        mnl_nlmsg_batch_stop(bt.b);
        if (fclose(f) != 0) {
                perror(argv[1]);
                return 1;
        }
        return 0;
}
