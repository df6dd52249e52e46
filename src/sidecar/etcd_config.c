/* etcd_config: see etcd_config.h. The input is parsed with libyaml's document API; the output is
 * written by hand: one "key: value" line per top-level key in input order, scalars in their
 * input style (plain stays plain, anything else double-quoted), lists in flow style. */
#include "etcd_config.h"
#include "../common/err.h"
#include "../common/strbuf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

typedef struct {
    StrBuf s;
    int oom; /* 1: out of memory; 2: over OUT_MAX */
} Out;

/* Output beyond this is refused: aliases can make a small file expand without bound. */
#define OUT_MAX (4u << 20)

static void put(Out *o, const char *s, size_t n) {
    if (o->oom) return;
    if (o->s.n + n > OUT_MAX) {
        o->oom = 2;
        return;
    }
    strbuf_add(&o->s, s, n);
    o->oom = o->s.oom;
}
static void puts_(Out *o, const char *s) {
    put(o, s, strlen(s));
}

/* A double-quoted YAML scalar (JSON escapes are valid YAML). */
static void put_quoted(Out *o, const char *s, size_t n) {
    put(o, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            put(o, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\x%02x", c);
            put(o, esc, 4);
        } else {
            put(o, (const char *)&s[i], 1);
        }
    }
    put(o, "\"", 1);
}

static void put_scalar(Out *o, const yaml_node_t *n) {
    const char *v = (const char *)n->data.scalar.value;
    size_t len = n->data.scalar.length;
    if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && len > 0)
        put(o, v, len);
    else
        put_quoted(o, v, len);
}

static void put_node(Out *o, yaml_document_t *d, yaml_node_t *n, int depth) {
    if (o->oom) return; /* over the cap: stop walking (aliases can form cycles) */
    if (!n || depth > 16) {
        puts_(o, "null");
        return;
    }
    if (n->type == YAML_SCALAR_NODE) {
        put_scalar(o, n);
    } else if (n->type == YAML_SEQUENCE_NODE) {
        puts_(o, "[");
        for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
             it++) {
            if (it != n->data.sequence.items.start) puts_(o, ", ");
            put_node(o, d, yaml_document_get_node(d, *it), depth + 1);
        }
        puts_(o, "]");
    } else {
        puts_(o, "{");
        for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top;
             p++) {
            if (p != n->data.mapping.pairs.start) puts_(o, ", ");
            put_node(o, d, yaml_document_get_node(d, p->key), depth + 1);
            puts_(o, ": ");
            put_node(o, d, yaml_document_get_node(d, p->value), depth + 1);
        }
        puts_(o, "}");
    }
}

static int scalar_is(const yaml_node_t *n, const char *s) {
    return n && n->type == YAML_SCALAR_NODE && n->data.scalar.length == strlen(s) &&
           memcmp(n->data.scalar.value, s, n->data.scalar.length) == 0;
}

static yaml_node_t *lookup(yaml_document_t *d, yaml_node_t *map, const char *key) {
    if (!map || map->type != YAML_MAPPING_NODE) return NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++)
        if (scalar_is(yaml_document_get_node(d, p->key), key))
            return yaml_document_get_node(d, p->value);
    return NULL;
}

/* A member's URLs from "key: {member: [urls]}" (or a plain value) as "a,b". */
static void put_urls(Out *o, yaml_document_t *d, yaml_node_t *v, const char *member) {
    if (v && v->type == YAML_MAPPING_NODE) v = lookup(d, v, member);
    if (!v) {
        puts_(o, "\"\"");
        return;
    }
    if (v->type == YAML_SCALAR_NODE) {
        put_scalar(o, v);
        return;
    }
    Out joined = {0};
    if (v->type == YAML_SEQUENCE_NODE) {
        for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
             it++) {
            yaml_node_t *u = yaml_document_get_node(d, *it);
            if (!u || u->type != YAML_SCALAR_NODE) continue;
            if (joined.s.n) put(&joined, ",", 1);
            put(&joined, (const char *)u->data.scalar.value, u->data.scalar.length);
        }
    }
    put_quoted(o, joined.s.d ? joined.s.d : "", joined.s.n);
    free(joined.s.d);
}

static int is_member(const EtcdMember *m, size_t n, const char *name, size_t len) {
    for (size_t i = 0; i < n; i++)
        if (strlen(m[i].name) == len && memcmp(m[i].name, name, len) == 0) return 1;
    return 0;
}

int etcd_config_render(const char *yaml, size_t len, const char *pod_name,
                       const EtcdMember *members, size_t n, char **text) {
    *text = NULL;
    if (len > (1u << 20)) return err_set(ERR_INVALID, "etcd config file larger than 1 MiB");
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser)) return err_set(ERR_NOMEM, "out of memory");
    yaml_parser_set_input_string(&parser, (const unsigned char *)yaml, len);
    if (!yaml_parser_load(&parser, &doc)) {
        int rc = err_set(ERR_INVALID, "etcd config file: %s at line %zu column %zu",
                         parser.problem ? parser.problem : "invalid YAML",
                         parser.problem_mark.line + 1, parser.problem_mark.column + 1);
        yaml_parser_delete(&parser);
        return rc;
    }
    yaml_parser_delete(&parser);
    int rc = 0;
    Out o = {0};
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root || root->type != YAML_MAPPING_NODE) {
        rc = err_set(ERR_INVALID, "etcd config file: not a YAML mapping");
        goto done;
    }
    char member[512] = "";
    yaml_node_t *prefix = lookup(&doc, root, "member-name-prefix");
    yaml_node_t *file_name = lookup(&doc, root, "name");
    if (pod_name && *pod_name) {
        if (prefix && prefix->type == YAML_SCALAR_NODE && prefix->data.scalar.length)
            snprintf(member, sizeof member, "%.*s-%s", (int)prefix->data.scalar.length,
                     (const char *)prefix->data.scalar.value, pod_name);
        else
            snprintf(member, sizeof member, "%s", pod_name);
    } else if (file_name && file_name->type == YAML_SCALAR_NODE) {
        snprintf(member, sizeof member, "%.*s", (int)file_name->data.scalar.length,
                 (const char *)file_name->data.scalar.value);
    }
    /* initial-cluster size decides the state (Go: single member -> new) */
    yaml_node_t *ic = lookup(&doc, root, "initial-cluster");
    size_t ic_entries = 0;
    if (ic && ic->type == YAML_SCALAR_NODE && ic->data.scalar.length) {
        ic_entries = 1;
        for (size_t i = 0; i < ic->data.scalar.length; i++)
            if (ic->data.scalar.value[i] == ',') ic_entries++;
    }
    int learner = 0;
    for (size_t i = 0; members && i < n; i++)
        learner |= members[i].is_learner;
    const char *state = ic_entries <= 1 ? "new" : learner ? "existing" : "new";
    int wrote_name = 0, wrote_state = 0;
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(&doc, p->key);
        yaml_node_t *v = yaml_document_get_node(&doc, p->value);
        if (!k || k->type != YAML_SCALAR_NODE) continue;
        put(&o, (const char *)k->data.scalar.value, k->data.scalar.length);
        puts_(&o, ": ");
        if (scalar_is(k, "name")) {
            put_quoted(&o, member, strlen(member));
            wrote_name = 1;
        } else if (scalar_is(k, "initial-advertise-peer-urls") ||
                   scalar_is(k, "advertise-client-urls")) {
            put_urls(&o, &doc, v, member);
        } else if (scalar_is(k, "initial-cluster-state")) {
            puts_(&o, state);
            wrote_state = 1;
        } else if (scalar_is(k, "initial-cluster") && v && v->type == YAML_SCALAR_NODE && members &&
                   n > 1) {
            /* keep entries of current members and of this member */
            Out kept = {0};
            const char *s = (const char *)v->data.scalar.value;
            size_t sl = v->data.scalar.length, i = 0;
            while (i < sl) {
                size_t j = i;
                while (j < sl && s[j] != ',')
                    j++;
                const char *eq = memchr(s + i, '=', j - i);
                size_t nl = eq ? (size_t)(eq - (s + i)) : j - i;
                if (is_member(members, n, s + i, nl) ||
                    (nl == strlen(member) && memcmp(s + i, member, nl) == 0)) {
                    if (kept.s.n) put(&kept, ",", 1);
                    put(&kept, s + i, j - i);
                }
                i = j + 1;
            }
            put_quoted(&o, kept.s.d ? kept.s.d : "", kept.s.n);
            free(kept.s.d);
        } else {
            put_node(&o, &doc, v, 0);
        }
        puts_(&o, "\n");
    }
    if (!wrote_name && member[0]) {
        puts_(&o, "name: ");
        put_quoted(&o, member, strlen(member));
        puts_(&o, "\n");
    }
    if (!wrote_state) {
        puts_(&o, "initial-cluster-state: ");
        puts_(&o, state);
        puts_(&o, "\n");
    }
    if (o.oom) {
        rc = o.oom == 2 ? err_set(ERR_INVALID, "etcd config file expands beyond 4 MiB (aliases)")
                        : err_set(ERR_NOMEM, "out of memory");
        goto done;
    }
    *text = o.s.d ? o.s.d : strdup("");
    o.s.d = NULL;
done:
    free(o.s.d);
    yaml_document_delete(&doc);
    return rc;
}

/* The URL list of node v ("a,b", a [a, b] sequence) appended to o, comma-separated. */
static void append_urls(Out *o, yaml_node_t *v, yaml_document_t *d) {
    if (!v) return;
    if (v->type == YAML_SCALAR_NODE && v->data.scalar.length) {
        if (o->s.n) put(o, ",", 1);
        put(o, (const char *)v->data.scalar.value, v->data.scalar.length);
    } else if (v->type == YAML_SEQUENCE_NODE) {
        for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
             it++)
            append_urls(o, yaml_document_get_node(d, *it), d);
    }
}

int etcd_config_member(const char *yaml, size_t len, const char *pod_name, EtcdConfigMember *out) {
    memset(out, 0, sizeof *out);
    char *text = NULL;
    int rc = etcd_config_render(yaml, len, pod_name, NULL, 0, &text);
    if (rc) return rc;
    free(text); /* rendered only to resolve the member name the same way as /config */
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser)) return err_set(ERR_NOMEM, "out of memory");
    yaml_parser_set_input_string(&parser, (const unsigned char *)yaml, len);
    if (!yaml_parser_load(&parser, &doc)) {
        yaml_parser_delete(&parser);
        return err_set(ERR_INVALID, "etcd config file: invalid YAML");
    }
    yaml_parser_delete(&parser);
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    yaml_node_t *prefix = lookup(&doc, root, "member-name-prefix");
    yaml_node_t *file_name = lookup(&doc, root, "name");
    if (pod_name && *pod_name) {
        if (prefix && prefix->type == YAML_SCALAR_NODE && prefix->data.scalar.length)
            snprintf(out->name, sizeof out->name, "%.*s-%s", (int)prefix->data.scalar.length,
                     (const char *)prefix->data.scalar.value, pod_name);
        else
            snprintf(out->name, sizeof out->name, "%s", pod_name);
    } else if (file_name && file_name->type == YAML_SCALAR_NODE) {
        snprintf(out->name, sizeof out->name, "%.*s", (int)file_name->data.scalar.length,
                 (const char *)file_name->data.scalar.value);
    }
    Out peer = {0}, clients = {0};
    yaml_node_t *v = lookup(&doc, root, "initial-advertise-peer-urls");
    append_urls(&peer, v && v->type == YAML_MAPPING_NODE ? lookup(&doc, v, out->name) : v, &doc);
    v = lookup(&doc, root, "advertise-client-urls");
    if (v && v->type == YAML_MAPPING_NODE) { /* every member's: how to reach the cluster */
        for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++)
            append_urls(&clients, yaml_document_get_node(&doc, p->value), &doc);
    } else {
        append_urls(&clients, v, &doc);
    }
    v = lookup(&doc, root, "initial-cluster");
    if (v && v->type == YAML_SCALAR_NODE)
        snprintf(out->initial_cluster, sizeof out->initial_cluster, "%.*s",
                 (int)v->data.scalar.length, (const char *)v->data.scalar.value);
    snprintf(out->peer_urls, sizeof out->peer_urls, "%s", peer.s.d ? peer.s.d : "");
    snprintf(out->client_urls, sizeof out->client_urls, "%s", clients.s.d ? clients.s.d : "");
    rc = peer.oom || clients.oom ? err_set(ERR_NOMEM, "out of memory") : 0;
    free(peer.s.d);
    free(clients.s.d);
    yaml_document_delete(&doc);
    return rc;
}

/* ---------- run mode: the client URLs of etcd's own command line ---------- */

/* The value of flag name in etcd's argv (Go flag syntax: -name=v, --name=v, -name v, --name v;
 * the last one wins), or NULL. Borrowed. */
const char *etcd_argv_flag(char *const *argv, const char *name) {
    const char *v = NULL;
    size_t len = strlen(name);
    for (char *const *a = argv + 1; *a; a++) {
        const char *p = *a;
        if (!strcmp(p, "--")) break;
        if (p[0] != '-') continue;
        p += p[1] == '-' ? 2 : 1;
        if (strncmp(p, name, len)) continue;
        if (p[len] == '=')
            v = p + len + 1;
        else if (p[len] == '\0' && a[1])
            v = *++a;
    }
    return v;
}

/* A top-level scalar of the etcd config file at path, malloc'ed, or NULL (absent or empty). */
static int file_scalar(const char *path, const char *key, char **out) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return err_set(ERR_IO, "etcd --config-file %s: %s", path, strerror(errno));
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser)) {
        fclose(f);
        return err_set(ERR_NOMEM, "out of memory");
    }
    yaml_parser_set_input_file(&parser, f);
    int loaded = yaml_parser_load(&parser, &doc);
    fclose(f);
    if (!loaded) {
        int rc =
            err_set(ERR_INVALID, "etcd --config-file %s: %s at line %zu", path,
                    parser.problem ? parser.problem : "invalid YAML", parser.problem_mark.line + 1);
        yaml_parser_delete(&parser);
        return rc;
    }
    yaml_parser_delete(&parser);
    int rc = 0;
    yaml_node_t *v = lookup(&doc, yaml_document_get_root_node(&doc), key);
    if (v && v->type == YAML_SCALAR_NODE && v->data.scalar.length) {
        *out = strndup((const char *)v->data.scalar.value, v->data.scalar.length);
        if (!*out) rc = err_set(ERR_NOMEM, "out of memory");
    }
    yaml_document_delete(&doc);
    return rc;
}

/* urls ("a,b") with wildcard hosts made loopback and unix:// URLs left out; malloc'ed. */
static char *connectable(const char *urls) {
    Out o = {0};
    const char *p = urls;
    while (*p) {
        size_t n = strcspn(p, ",");
        const char *u = p, *end = p + n;
        p = *end ? end + 1 : end;
        while (u < end && (*u == ' ' || *u == '\t'))
            u++;
        if (u == end || (end - u >= 7 && !strncmp(u, "unix://", 7)) ||
            (end - u >= 8 && !strncmp(u, "unixs://", 8)))
            continue;
        const char *host = strstr(u, "://");
        host = host && host < end ? host + 3 : u;
        if (o.s.n) put(&o, ",", 1);
        put(&o, u, (size_t)(host - u));
        size_t rest = (size_t)(end - host);
        if (rest >= 7 && !strncmp(host, "0.0.0.0", 7) && (rest == 7 || host[7] == ':')) {
            puts_(&o, "127.0.0.1");
            host += 7;
        } else if (rest >= 4 && !strncmp(host, "[::]", 4)) {
            puts_(&o, "[::1]");
            host += 4;
        } else if (rest && host[0] == ':') {
            puts_(&o, "127.0.0.1");
        }
        put(&o, host, (size_t)(end - host));
    }
    if (o.oom) {
        free(o.s.d);
        return NULL;
    }
    return o.s.d ? o.s.d : strdup("");
}

int etcd_client_urls(char *const *argv, char **out, const char **source) {
    *out = NULL;
    *source = NULL;
    static const char *const keys[] = {"listen-client-urls", "advertise-client-urls"};
    static const char *const envs[] = {"ETCD_LISTEN_CLIENT_URLS", "ETCD_ADVERTISE_CLIENT_URLS"};
    char *found = NULL;
    const char *cfg = etcd_argv_flag(argv, "config-file");
    if (!cfg) cfg = getenv("ETCD_CONFIG_FILE");
    for (size_t k = 0; k < 2 && !found; k++) {
        if (cfg && *cfg) { /* etcd then ignores its other flags and environment */
            int rc = file_scalar(cfg, keys[k], &found);
            if (rc) return rc;
            if (found)
                *source = k ? "advertise-client-urls of etcd's --config-file"
                            : "listen-client-urls of etcd's --config-file";
            continue;
        }
        const char *v = etcd_argv_flag(argv, keys[k]);
        if (v && *v) {
            *source = k ? "etcd's --advertise-client-urls" : "etcd's --listen-client-urls";
        } else if ((v = getenv(envs[k])) && *v) {
            *source = envs[k];
        } else {
            continue;
        }
        if (!(found = strdup(v))) return err_set(ERR_NOMEM, "out of memory");
    }
    if (!found) return 0;
    *out = connectable(found);
    free(found);
    if (!*out) return err_set(ERR_NOMEM, "out of memory");
    if (!**out) {
        free(*out);
        *out = NULL;
        return err_set(ERR_INVALID, "%s has no TCP client URL", *source);
    }
    return 0;
}

int etcd_config_read_file(char **buf, size_t *len, const char **path_out) {
    *buf = NULL;
    *len = 0;
    const char *path = getenv("ETCD_CONF");
    if (!path || !*path) path = "/var/etcd/config/etcd.conf.yaml";
    if (path_out) *path_out = path;
    FILE *f = fopen(path, "rb");
    if (!f)
        return err_set(ERR_NOT_FOUND, "etcd config file %s (ETCD_CONF): %s", path, strerror(errno));
    char *b = malloc((1 << 20) + 1);
    size_t n = b ? fread(b, 1, (1 << 20) + 1, f) : 0;
    fclose(f);
    if (!b) return err_set(ERR_NOMEM, "out of memory");
    if (n > (1 << 20)) {
        free(b);
        return err_set(ERR_INVALID, "etcd config file %s is larger than 1 MiB", path);
    }
    *buf = b;
    *len = n;
    return 0;
}
