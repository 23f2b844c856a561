/* names.c — the addresses brig's DNS stub hands out (filtered mode).
 *
 * Inside a filtered sandbox an allowed name resolves to an address of
 * brig's own, one per name: IPv4 from 100.64.0.0/16 (shared address space,
 * never routed here: the sandbox's network namespace has no way out) and
 * IPv6 from fd62:7269:6700::/64. A connection to such an address is
 * redirected to the supervisor like any other, and the address names the
 * host the program meant, even when its first bytes carry no TLS SNI or
 * HTTP Host (ssh, databases). The real addresses are looked up by the
 * supervisor when the connection is made, checked, and never shown
 * inside: DNS rebinding has nothing to rebind. */
#define _GNU_SOURCE
#include "net/net.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const uint8_t pool_v4[4] = { 100, 64, 0, 0 };
static const uint8_t pool_v6[8] = { 0xfd, 0x62, 0x72, 0x69, 0x67, 0x00, 0x00, 0x00 };

/* Twice the pool: the hash table never fills past one half, so a probe
 * ends quickly even when a wildcard rule lets a sandbox ask for tens of
 * thousands of names. */
#define SLOTS (2 * (NAMES_MAX + 1))

void names_free(struct name_book *nb)
{
        for (size_t i = 0; i < nb->n; i++)
                free(nb->names[i]);
        free(nb->names);
        free(nb->slots);
        nb->names = NULL;
        nb->slots = NULL;
        nb->n = nb->cap = 0;
}

static uint32_t hash(const char *s)
{
        uint32_t h = 2166136261u;  /* FNV-1a */
        for (; *s; s++)
                h = (h ^ (uint8_t)*s) * 16777619u;
        return h;
}

int names_index(struct name_book *nb, const char *name)
{
        if (!nb->slots && !(nb->slots = calloc(SLOTS, sizeof *nb->slots)))
                return -ENOMEM;
        uint32_t slot = hash(name) % SLOTS;
        for (; nb->slots[slot]; slot = (slot + 1) % SLOTS)
                if (strcmp(nb->names[nb->slots[slot] - 1], name) == 0)
                        return nb->slots[slot] - 1;
        if (nb->n == NAMES_MAX)
                return -ENOSPC;
        if (nb->n == nb->cap) {
                size_t cap = nb->cap ? nb->cap * 2 : 16;
                char **grown = realloc(nb->names, cap * sizeof *grown);
                if (!grown)
                        return -ENOMEM;
                nb->names = grown;
                nb->cap = cap;
        }
        char *copy = strdup(name);
        if (!copy)
                return -ENOMEM;
        nb->names[nb->n] = copy;
        nb->slots[slot] = (int32_t)nb->n + 1;
        return (int)nb->n++;
}

void names_addr(int index, int family, struct net_addr *a)
{
        uint32_t host = (uint32_t)index + 1;  /* .0 is the network's own */
        if (family == AF_INET) {
                uint8_t v4[4] = { pool_v4[0], pool_v4[1], (uint8_t)(host >> 8), (uint8_t)host };
                net_addr_from_v4(a, v4);
                return;
        }
        memset(a, 0, sizeof *a);
        a->family = AF_INET6;
        memcpy(a->b, pool_v6, sizeof pool_v6);
        a->b[12] = (uint8_t)(host >> 24);
        a->b[13] = (uint8_t)(host >> 16);
        a->b[14] = (uint8_t)(host >> 8);
        a->b[15] = (uint8_t)host;
}

bool names_in_pool(const struct net_addr *a)
{
        if (a->family == AF_INET)
                return memcmp(a->b + 12, pool_v4, 2) == 0;
        return memcmp(a->b, pool_v6, sizeof pool_v6) == 0;
}

const char *names_lookup(const struct name_book *nb, const struct net_addr *a)
{
        if (!names_in_pool(a))
                return NULL;
        uint32_t host = a->family == AF_INET ? (uint32_t)a->b[14] << 8 | a->b[15]
                                             : (uint32_t)a->b[12] << 24 | (uint32_t)a->b[13] << 16 |
                                                       (uint32_t)a->b[14] << 8 | a->b[15];
        if (a->family == AF_INET6 && memcmp(a->b + 8, "\0\0\0\0", 4) != 0)
                return NULL;
        if (host == 0 || host > nb->n)
                return NULL;
        return nb->names[host - 1];
}
