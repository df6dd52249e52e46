/* etcd_config: the etcd config file the launcher gets from GET /config (docs/go-tool.md §2): the
 * Gardener etcd.conf.yaml, with this member's name and URLs resolved. Keys "name",
 * "initial-advertise-peer-urls", "advertise-client-urls" (maps of member name -> URL list in the
 * input), "initial-cluster" and "initial-cluster-state" are rewritten; every other key is kept
 * as written. */
#ifndef ETCDBR_ETCD_CONFIG_H
#define ETCDBR_ETCD_CONFIG_H

#include "../etcd/etcd_client.h"

#include <stddef.h>

/* Renders the config from yaml (len bytes, borrowed; at most 1 MiB) for member pod_name (the
 * member name is "<member-name-prefix>-<pod_name>" when the file has member-name-prefix; NULL
 * pod_name keeps the file's "name"). members (n of them) is the cluster's member list, or NULL
 * when it could not be read. Rules (Go tool): initial-cluster keeps only current members and this
 * one when the cluster has more than one member; initial-cluster-state is "new" for a single-
 * member initial cluster, else "existing" if a learner is present, else "new".
 * *text is malloc'ed YAML. 0 or ERR_INVALID (not a YAML mapping, message with line) / ERR_NOMEM. */
int etcd_config_render(const char *yaml, size_t len, const char *pod_name,
                       const EtcdMember *members, size_t n, char **text);

/* This member as the etcd config file describes it (docs/go-tool.md §10.6). */
typedef struct EtcdConfigMember {
    char name[256];             /* resolved as etcd_config_render does; "" if none */
    char peer_urls[1024];       /* its initial-advertise-peer-urls, "a,b"; "" if none */
    char client_urls[2048];     /* advertise-client-urls of every member in the file, "a,b" */
    char initial_cluster[4096]; /* initial-cluster as written */
} EtcdConfigMember;

/* Reads the etcd config file of docs/go-tool.md §10.6: $ETCD_CONF, else
 * /var/etcd/config/etcd.conf.yaml (the Go tool's fixed path), at most 1 MiB. *buf (malloc'ed, owned
 * by the caller, not NUL-terminated) and *len receive its bytes; *path (may be NULL) the path read
 * (static or from the environment). 0, ERR_NOT_FOUND (cannot open; message with the path and
 * errno), ERR_INVALID (larger than 1 MiB), ERR_NOMEM. */
int etcd_config_read_file(char **buf, size_t *len, const char **path);

/* Reads yaml (len bytes, borrowed; as etcd_config_render) for member pod_name (NULL: the file's
 * "name"). Values longer than the fields are cut. 0, ERR_INVALID (not YAML) or ERR_NOMEM. */
int etcd_config_member(const char *yaml, size_t len, const char *pod_name, EtcdConfigMember *out);

/* The value of flag name (without dashes) in etcd's argv (argv[0] the binary, NULL-terminated;
 * Go flag syntax: -name=v, --name=v, -name v, --name v; the last one wins, as in etcd), or
 * NULL. Borrowed from argv. */
const char *etcd_argv_flag(char *const *argv, const char *name);

/* Run mode: the client URLs of the etcd that argv starts (argv[0] the binary, NULL-terminated),
 * for --endpoints when it is not given. From etcd's --config-file (or ETCD_CONFIG_FILE), whose
 * listen-client-urls, else advertise-client-urls, count alone as etcd ignores its flags then;
 * otherwise --listen-client-urls, else --advertise-client-urls, else ETCD_LISTEN_CLIENT_URLS,
 * else ETCD_ADVERTISE_CLIENT_URLS. Wildcard hosts (0.0.0.0, [::], none) become loopback;
 * unix:// URLs are left out. *out: malloc'ed "url,url", NULL when etcd was given none (its
 * default http://localhost:2379 applies); *source (static) names where they came from.
 * 0, ERR_IO / ERR_INVALID (config file unreadable, no TCP URL) or ERR_NOMEM. */
int etcd_client_urls(char *const *argv, char **out, const char **source);

#endif
