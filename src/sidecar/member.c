/* member: see member.h. Every cluster call goes to the other members' client URLs (this
 * member's etcd is stopped while the initializer runs, and a learner serves neither the member
 * calls nor linearizable reads). "Quorum among the others" is checked before any change: more
 * than half of the voting members (this one included) other than this one answer Status with a
 * leader, and a linearizable read through them succeeds. */
#include "member.h"
#include "../common/exitcode.h"
#include "etcd_config.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../common/mem.h"
#include "../common/timeutil.h"
#include "../server/metrics.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LIST_ATTEMPTS 2      /* member list at initialization: now and after 1 s */
#define LIST_TIMEOUT_MS 2000 /* an etcd waiting for its peers at bootstrap does not answer */
#define ADD_ATTEMPTS 6       /* docs/go-tool.md §9.2: 6 attempts, backoff 2 s x2 */
#define TOO_MANY_LEARNERS_WAIT_MS 5000
#define TOO_MANY_LEARNERS_MAX 60 /* 5 minutes waiting for another learner's promotion */
#define REMOVE_ATTEMPTS 5
#define REMOVE_SETTLE_MS 1000
#define CALL_TIMEOUT_MS 5000
#define STATUS_TIMEOUT_MS 2000
#define WARN_EVERY_MS 60000
#define CONFIRM_MS 10000    /* the member's own Status polled after a promotion, at most */
#define CONFIRM_POLL_MS 100 /* ... every 100 ms */
#define CONFIRM_SAY_MS 5000 /* ... saying what it waits for after 5 s */

struct MemberCtl {
    EtcdConfig etcd; /* TLS and credentials; endpoints replaced per call */
    char *own_ep;    /* this member's client endpoint */
    char name[256];
    char **peer; /* this member's peer URLs */
    size_t n_peer;
    size_t ic_entries; /* entries of the initial cluster */
    char **cluster;    /* client URLs reaching the cluster */
    size_t n_cluster;
    int64_t period_ms;
    atomic_int *stop;
    InitMember hooks;
    /* join */
    int joined;
    char *initial_cluster; /* "name=url,..." of the members after the add */
    char **argv_buf;
    char *argv_state, *argv_ic;
    /* promotion */
    int learner, gone;
    int committed; /* the leader committed the promotion; the member has not applied it yet */
    int64_t learner_since_ms, next_promote_ms, last_warn_ms, last_catchup_log_ms;
};

/* ---------- helpers ---------- */

static void free_list(char **l, size_t n) {
    for (size_t i = 0; l && i < n; i++)
        free(l[i]);
    free(l);
}

/* Appends the entries of "a,b" (spaces trimmed, empty ones skipped) to *l. 0 or ERR_NOMEM. */
static int split_into(const char *s, char ***l, size_t *n) {
    while (s && *s) {
        size_t len = strcspn(s, ",");
        const char *b = s, *e = s + len;
        s = *e ? e + 1 : e;
        while (b < e && (*b == ' ' || *b == '\t'))
            b++;
        while (e > b && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        if (b == e) continue;
        char **nl = realloc(*l, (*n + 1) * sizeof *nl);
        if (!nl) return err_set(ERR_NOMEM, "out of memory");
        *l = nl;
        if (!(nl[*n] = strndup(b, (size_t)(e - b)))) return err_set(ERR_NOMEM, "out of memory");
        (*n)++;
    }
    return 0;
}

/* URLs compare equal up to a trailing slash. */
static int url_eq(const char *a, size_t an, const char *b, size_t bn) {
    while (an && a[an - 1] == '/')
        an--;
    while (bn && b[bn - 1] == '/')
        bn--;
    return an == bn && memcmp(a, b, an) == 0;
}

/* Whether the comma-joined list has one of this member's peer URLs. */
static int has_my_peer_url(const MemberCtl *m, const char *list) {
    const char *s = list;
    while (*s) {
        size_t len = strcspn(s, ",");
        for (size_t i = 0; i < m->n_peer; i++)
            if (url_eq(s, len, m->peer[i], strlen(m->peer[i]))) return 1;
        s += len;
        if (*s) s++;
    }
    return 0;
}

/* This member in the list: by peer URL (a learner has no name until it starts) or by name. */
static const EtcdMember *find_self(const MemberCtl *m, const EtcdMember *ms, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (has_my_peer_url(m, ms[i].peer_urls)) return &ms[i];
    for (size_t i = 0; i < n; i++)
        if (m->name[0] && !strcmp(ms[i].name, m->name)) return &ms[i];
    return NULL;
}

static int client_for(const MemberCtl *m, const char *const *eps, size_t n, int64_t timeout_ms,
                      EtcdClient **c) {
    EtcdConfig ec = m->etcd;
    ec.endpoints = eps;
    ec.n_endpoints = n;
    ec.connection_timeout_ms = timeout_ms;
    return etcd_client_new(&ec, c);
}

static int list_members(MemberCtl *m, EtcdMember **ms, size_t *n) {
    EtcdClient *c = NULL;
    int rc = client_for(m, (const char *const *)m->cluster, m->n_cluster, LIST_TIMEOUT_MS, &c);
    if (!rc) rc = etcd_member_list(c, ms, n);
    etcd_client_free(c);
    return rc;
}

static int list_members_retry(MemberCtl *m, EtcdMember **ms, size_t *n) {
    int rc = 0;
    for (int a = 0; a < LIST_ATTEMPTS; a++) {
        if (a && sleep_unless_stopped(m->stop, 1000LL << (a - 1)))
            return err_set(ERR_CANCELED, "stopping");
        if (!(rc = list_members(m, ms, n))) return 0;
    }
    return rc;
}

/* Status of one member through its client URLs: 1 when it answers; *has_leader (may be NULL)
 * whether it knows a leader. */
static int member_answers(const MemberCtl *m, const EtcdMember *mem, int *has_leader) {
    char **eps = NULL;
    size_t n = 0;
    int ok = 0;
    if (has_leader) *has_leader = 0;
    if (split_into(mem->client_urls, &eps, &n) == 0 && n) {
        EtcdClient *c = NULL;
        EtcdStatus st;
        if (client_for(m, (const char *const *)eps, n, STATUS_TIMEOUT_MS, &c) == 0 &&
            etcd_status(c, &st) == 0) {
            ok = 1;
            if (has_leader) *has_leader = st.leader != 0;
        }
        etcd_client_free(c);
    }
    free_list(eps, n);
    return ok;
}

static int member_has_leader(const MemberCtl *m, const EtcdMember *mem) {
    int lead = 0;
    return member_answers(m, mem, &lead) && lead;
}

/* More than half of the voting members answer with a leader without this one, and a
 * linearizable read through the cluster endpoints succeeds. *why gets the reason when not. */
static int others_have_quorum(MemberCtl *m, const EtcdMember *ms, size_t n, const EtcdMember *self,
                              char *why, size_t why_len) {
    size_t voters = 0, up = 0;
    for (size_t i = 0; i < n; i++) {
        if (ms[i].is_learner) continue;
        voters++;
        if (&ms[i] != self && member_has_leader(m, &ms[i])) up++;
    }
    size_t need = voters / 2 + 1;
    if (up < need) {
        snprintf(why, why_len,
                 "%zu of %zu voting members answer with a leader without this one; "
                 "%zu needed",
                 up, voters, need);
        return 0;
    }
    EtcdClient *c = NULL;
    int64_t rev = 0;
    int rc = client_for(m, (const char *const *)m->cluster, m->n_cluster, CALL_TIMEOUT_MS, &c);
    if (!rc) rc = etcd_get_revision(c, &rev);
    etcd_client_free(c);
    if (rc) {
        snprintf(why, why_len, "a linearizable read failed: %s", err_msg());
        return 0;
    }
    return 1;
}

static void observe(EtcdbrMetricId id, int ok, double seconds) {
    static const char *const tf[2] = {"false", "true"};
    metrics_histogram_observe(etcdbr_metric(id), (const char *[]){tf[ok != 0]}, seconds);
}

/* ---------- initializer hooks ---------- */

static InitMemberState probe(void *ctx) {
    MemberCtl *m = ctx;
    if (m->ic_entries <= 1) return INIT_MEMBER_UNKNOWN; /* single member (docs/go-tool.md §9.2) */
    if (!m->n_cluster) {
        log_warn("member %s: the initial cluster has %zu members but no endpoint reaches the "
                 "others (give --service-endpoints): single-member rules apply",
                 m->name, m->ic_entries);
        return INIT_MEMBER_UNKNOWN;
    }
    EtcdMember *ms = NULL;
    size_t n = 0;
    if (list_members_retry(m, &ms, &n)) {
        log_info("member %s: the cluster's member list cannot be read (%s): single-member rules "
                 "apply (cluster bootstrap, or no other member running)",
                 m->name, err_msg());
        return INIT_MEMBER_UNKNOWN;
    }
    InitMemberState st = INIT_MEMBER_UNKNOWN;
    const EtcdMember *self = find_self(m, ms, n);
    char why[256] = "";
    /* client URLs are published by a member's first start; a member of the initial cluster has
     * its name from --initial-cluster before */
    int never_started = self && !self->client_urls[0] && !self->is_learner;
    int quorum = others_have_quorum(m, ms, n, self, why, sizeof why);
    if (never_started && !quorum) {
        log_info("member %s is listed (%llx) but has never started: cluster bootstrap, "
                 "single-member rules apply",
                 m->name, (unsigned long long)self->id);
    } else if (never_started) {
        /* the others already run: a db restored from the store (or an empty one) would sit at
         * the bootstrap's raft index, and the leader would replay its log from there onto it */
        log_info("member %s is listed (%llx) but has never started, and the other members run "
                 "with quorum: it joins them (a valid data dir starts as is, else as a learner), "
                 "never restored from the store",
                 m->name, (unsigned long long)self->id);
        st = INIT_MEMBER_LISTED;
    } else if (!quorum) {
        log_warn("member %s: the other members have no quorum (%s): no member is removed or "
                 "added; a valid data dir starts as is, an invalid one is not restored",
                 m->name, why);
        st = INIT_MEMBER_NO_QUORUM;
    } else if (self && member_answers(m, self, NULL)) {
        /* this member's etcd is stopped while the initializer runs: a running one is another */
        log_error("member %s: the member list entry %llx (%s, peer URLs %s) answers on its client "
                  "URLs %s, so it is another running member: check --name and the peer URLs; "
                  "single-member rules apply, no member is removed or added",
                  m->name, (unsigned long long)self->id, self->name, self->peer_urls,
                  self->client_urls);
    } else if (self) {
        log_info("member %s is in the cluster's member list as %llx (%s, %zu members)", m->name,
                 (unsigned long long)self->id, self->is_learner ? "learner" : "voting member", n);
        st = INIT_MEMBER_LISTED;
    } else {
        log_info("member %s is not in the cluster's member list (%zu members): scale-up, it "
                 "joins as a learner",
                 m->name, n);
        st = INIT_MEMBER_ABSENT;
    }
    free(ms);
    return st;
}

static int remove_self(void *ctx) {
    MemberCtl *m = ctx;
    int rc = 0;
    for (int a = 0; a < REMOVE_ATTEMPTS; a++) {
        if (a && sleep_unless_stopped(m->stop, 1000LL << a))
            return err_set(ERR_CANCELED, "stopping");
        EtcdMember *ms = NULL;
        size_t n = 0;
        if ((rc = list_members(m, &ms, &n))) continue;
        const EtcdMember *self = find_self(m, ms, n);
        if (!self) {
            free(ms);
            log_info("member %s is no longer in the member list: nothing to remove", m->name);
            return 0;
        }
        char why[256] = "";
        if (!others_have_quorum(m, ms, n, self, why, sizeof why)) {
            rc = err_set(ERR_ETCD, "not removing member %s: the other members have no quorum (%s)",
                         m->name, why);
            free(ms);
            continue;
        }
        if (member_answers(m, self, NULL)) { /* never remove a running member */
            rc = err_set(ERR_EXISTS,
                         "not removing member %llx (%s): it answers on its client URLs %s, so "
                         "it is not this stopped member",
                         (unsigned long long)self->id, self->name, self->client_urls);
            free(ms);
            return rc;
        }
        uint64_t id = self->id;
        free(ms);
        EtcdClient *c = NULL;
        int64_t t0 = now_mono_ms();
        rc = client_for(m, (const char *const *)m->cluster, m->n_cluster, CALL_TIMEOUT_MS, &c);
        if (!rc) rc = etcd_member_remove(c, id);
        etcd_client_free(c);
        int gone = rc && strstr(err_msg(), "member not found");
        observe(ETCDBR_M_MEMBER_REMOVE_DURATION_SECONDS, rc == 0 || gone,
                (double)(now_mono_ms() - t0) / 1000.0);
        if (rc == 0 || gone) {
            log_warn("removed member %s (%llx) from the cluster: its data dir is unusable, it "
                     "rejoins as a learner",
                     m->name, (unsigned long long)id);
            /* raft silently drops a configuration change proposed before the previous one is
             * applied everywhere it counts (the add would time out): give it a moment */
            sleep_unless_stopped(m->stop, REMOVE_SETTLE_MS);
            return 0;
        }
        log_warn("removing member %s (%llx) failed (attempt %d of %d): %s", m->name,
                 (unsigned long long)id, a + 1, REMOVE_ATTEMPTS, err_msg());
    }
    return rc;
}

/* m->initial_cluster from the member list: "name=peer-url" for each peer URL of each member,
 * this member by its own name (a learner has none until it starts). */
static int set_initial_cluster(MemberCtl *m, const EtcdMember *ms, size_t n, uint64_t self_id) {
    size_t cap = 1;
    for (size_t i = 0; i < n; i++)
        cap += (sizeof ms[i].name + 32) * (1 + strlen(ms[i].peer_urls)) + strlen(m->name);
    char *out = calloc(1, cap), *p = out;
    if (!out) return err_set(ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        char nm[300];
        if (ms[i].id == self_id)
            snprintf(nm, sizeof nm, "%s", m->name);
        else if (ms[i].name[0])
            snprintf(nm, sizeof nm, "%s", ms[i].name);
        else /* another member that never started: etcd matches members by peer URLs */
            snprintf(nm, sizeof nm, "unnamed-%llx", (unsigned long long)ms[i].id);
        const char *s = ms[i].peer_urls;
        while (*s) {
            size_t len = strcspn(s, ",");
            p += sprintf(p, "%s%s=%.*s", p == out ? "" : ",", nm, (int)len, s);
            s += len;
            if (*s) s++;
        }
    }
    free(m->initial_cluster);
    m->initial_cluster = out;
    return 0;
}

/* After "Peer URLs already exists": an earlier add whose reply was lost left this member as a
 * learner that never started. 1 = that is so (and the initial cluster is set). */
static int already_added(MemberCtl *m) {
    EtcdMember *ms = NULL;
    size_t n = 0;
    if (list_members(m, &ms, &n)) return 0;
    const EtcdMember *self = find_self(m, ms, n);
    int ok =
        self && self->is_learner && !self->name[0] && set_initial_cluster(m, ms, n, self->id) == 0;
    free(ms);
    return ok;
}

static int add_learner(void *ctx) {
    MemberCtl *m = ctx;
    int rc = 0, waited = 0;
    int64_t backoff = 2000;
    for (int a = 0; a < ADD_ATTEMPTS;) {
        EtcdClient *c = NULL;
        EtcdMember added, *ms = NULL;
        size_t n = 0;
        int64_t t0 = now_mono_ms();
        rc = client_for(m, (const char *const *)m->cluster, m->n_cluster, CALL_TIMEOUT_MS, &c);
        if (!rc)
            rc = etcd_member_add(c, (const char *const *)m->peer, m->n_peer, 1, &added, &ms, &n);
        etcd_client_free(c);
        double secs = (double)(now_mono_ms() - t0) / 1000.0;
        if (rc && strstr(err_msg(), "Peer URLs already exists") && already_added(m)) {
            log_info("member %s was already added as a learner", m->name);
            rc = 0;
        } else if (!rc) {
            rc = set_initial_cluster(m, ms, n, added.id);
        }
        free(ms);
        metrics_counter_inc(etcdbr_metric(ETCDBR_M_IS_LEARNER_COUNT_TOTAL),
                            (const char *[]){rc ? "false" : "true"});
        observe(ETCDBR_M_ADD_LEARNER_DURATION_SECONDS, rc == 0, secs);
        if (!rc) {
            m->joined = 1;
            log_info("added member %s as a learner with peer URLs %s; initial cluster %s", m->name,
                     m->peer[0], m->initial_cluster);
            return 0;
        }
        if (strstr(err_msg(), "too many learner")) { /* another learner is catching up */
            if (waited++ >= TOO_MANY_LEARNERS_MAX) break;
            if (waited == 1 || waited % 6 == 0)
                log_info("member %s: the cluster has a learner already; waiting for its "
                         "promotion before joining",
                         m->name);
            if (sleep_unless_stopped(m->stop, TOO_MANY_LEARNERS_WAIT_MS))
                return err_set(ERR_CANCELED, "stopping");
            continue;
        }
        a++;
        log_warn("adding member %s as a learner failed (attempt %d of %d): %s", m->name, a,
                 ADD_ATTEMPTS, err_msg());
        if (a < ADD_ATTEMPTS && sleep_unless_stopped(m->stop, backoff))
            return err_set(ERR_CANCELED, "stopping");
        backoff = backoff * 2 > 120000 ? 120000 : backoff * 2;
    }
    return rc;
}

/* ---------- promotion ---------- */

/* The member is a voting member by its own word: promoted, and the promotion applied. */
static void promoted(MemberCtl *m, uint64_t id) {
    log_info("promoted member %s (%llx) to a voting member after %.1fs as a learner (its own "
             "Status says so)",
             m->name, (unsigned long long)id,
             (double)(now_mono_ms() - m->learner_since_ms) / 1000.0);
    metrics_gauge_set(etcdbr_metric(ETCDBR_M_IS_LEARNER), NULL, 0);
    m->learner = 0;
    m->committed = 0;
}

/* After the leader committed this member's promotion: MemberPromote returns once the leader
 * applied it, and the member applies it later; until then it still refuses writes ("rpc not
 * supported for learner"). Polls the member's own Status through its own endpoint every
 * CONFIRM_POLL_MS until it says it is no longer a learner, for CONFIRM_MS at most (then the
 * next ticks look again), ending at once on stop. */
static void confirm_promotion(MemberCtl *m, uint64_t id) {
    m->committed = 1;
    int64_t t0 = now_mono_ms(), said = 0;
    for (;;) {
        EtcdClient *c = NULL;
        EtcdStatus own;
        const char *ep = m->own_ep;
        int rc = client_for(m, &ep, 1, STATUS_TIMEOUT_MS, &c);
        if (!rc) rc = etcd_status(c, &own);
        etcd_client_free(c);
        if (!rc && !own.is_learner) {
            promoted(m, id);
            return;
        }
        int64_t waited = now_mono_ms() - t0;
        if (waited >= CONFIRM_SAY_MS && !said) {
            said = 1;
            log_info("member %s (%llx): the leader committed its promotion %.0fs ago; waiting "
                     "for the member to apply it (its Status at %s: %s)",
                     m->name, (unsigned long long)id, (double)waited / 1000.0, m->own_ep,
                     rc ? err_msg() : "still a learner");
        }
        if (waited >= CONFIRM_MS) {
            log_warn("member %s (%llx): promotion committed, but its own Status does not say "
                     "so after %.0fs; looking again at each status check",
                     m->name, (unsigned long long)id, (double)waited / 1000.0);
            return;
        }
        if (sleep_unless_stopped(m->stop, CONFIRM_POLL_MS)) return;
    }
}

void member_ctl_tick(MemberCtl *m, int status_rc, const EtcdStatus *st) {
    if (!m || status_rc) return;
    Metric *gauge = etcdbr_metric(ETCDBR_M_IS_LEARNER);
    int64_t now = now_mono_ms();
    if (!st->is_learner) {
        if (m->committed)
            promoted(m, st->member_id);
        else if (m->learner)
            log_info("member %s (%llx) is a voting member now", m->name,
                     (unsigned long long)st->member_id);
        m->learner = 0;
        metrics_gauge_set(gauge, NULL, 0);
        return;
    }
    metrics_gauge_set(gauge, NULL, 1);
    if (m->committed) return; /* promoted: the member has yet to apply it */
    if (!m->learner) {
        m->learner = 1;
        m->learner_since_ms = now;
        m->next_promote_ms = now;
        m->last_catchup_log_ms = now;
        log_info("member %s (%llx) is a learner: promoting it once it has caught up with the "
                 "leader",
                 m->name, (unsigned long long)st->member_id);
    }
    if (m->gone || now < m->next_promote_ms) return;
    m->next_promote_ms = now + m->period_ms;
    char last[512] = "no endpoint of another member is known (give --service-endpoints)";
    for (size_t i = 0; i < m->n_cluster; i++) {
        if (url_eq(m->cluster[i], strlen(m->cluster[i]), m->own_ep, strlen(m->own_ep))) continue;
        EtcdClient *c = NULL;
        int64_t t0 = now_mono_ms();
        const char *ep = m->cluster[i];
        int rc = client_for(m, &ep, 1, CALL_TIMEOUT_MS, &c);
        if (!rc) rc = etcd_member_promote(c, st->member_id);
        etcd_client_free(c);
        double secs = (double)(now_mono_ms() - t0) / 1000.0;
        const char *msg = err_msg();
        if (rc == 0) {
            observe(ETCDBR_M_MEMBER_PROMOTE_DURATION_SECONDS, 1, secs);
            log_info("member %s (%llx): promotion committed by the leader; waiting for the "
                     "member to apply it",
                     m->name, (unsigned long long)st->member_id);
            confirm_promotion(m, st->member_id);
            return;
        }
        if (strstr(msg, "in sync with leader")) { /* not caught up yet: quietly later */
            log_debug("member %s: not promoted yet: %s", m->name, msg);
            if (now - m->last_catchup_log_ms >= WARN_EVERY_MS) {
                m->last_catchup_log_ms = now;
                log_info("member %s is still catching up with the leader (learner for %.0fs)",
                         m->name, (double)(now - m->learner_since_ms) / 1000.0);
            }
            return;
        }
        if (strstr(msg, "can only promote a learner member")) { /* promoted meanwhile */
            log_info("member %s (%llx) is no longer a learner in the leader's member list; "
                     "waiting for the member to apply it",
                     m->name, (unsigned long long)st->member_id);
            confirm_promotion(m, st->member_id);
            return;
        }
        if (strstr(msg, "member not found")) {
            observe(ETCDBR_M_MEMBER_PROMOTE_DURATION_SECONDS, 0, secs);
            log_error("member %s (%llx) was removed from the cluster while a learner; restart it "
                      "to rejoin",
                      m->name, (unsigned long long)st->member_id);
            m->gone = 1;
            return;
        }
        snprintf(last, sizeof last, "%s", msg); /* a learner or an unreachable member: next */
        if (!strstr(msg, "not supported for learner"))
            observe(ETCDBR_M_MEMBER_PROMOTE_DURATION_SECONDS, 0, secs);
    }
    if (now - m->last_warn_ms >= WARN_EVERY_MS) {
        m->last_warn_ms = now;
        log_warn("member %s: promotion failed, retrying every %.0fs: %s", m->name,
                 (double)m->period_ms / 1000.0, last);
    }
}

/* ---------- run mode ---------- */

char *const *member_ctl_etcd_argv(MemberCtl *m, char *const *argv) {
    if (!m || !m->joined) return argv;
    m->joined = 0;
    size_t argc = 0;
    while (argv[argc])
        argc++;
    FREE_ALL(m->argv_buf, m->argv_state, m->argv_ic);
    m->argv_buf = calloc(argc + 3, sizeof *m->argv_buf);
    m->argv_state = strdup("--initial-cluster-state=existing");
    size_t icl = strlen(m->initial_cluster ? m->initial_cluster : "") + 20;
    m->argv_ic = malloc(icl);
    if (!m->argv_buf || !m->argv_state || !m->argv_ic) {
        log_error("out of memory: etcd starts with its own command line");
        return argv;
    }
    snprintf(m->argv_ic, icl, "--initial-cluster=%s", m->initial_cluster);
    memcpy(m->argv_buf, argv, argc * sizeof *argv);
    m->argv_buf[argc] = m->argv_state;
    m->argv_buf[argc + 1] = m->argv_ic;
    if (etcd_argv_flag(argv, "config-file"))
        log_warn("etcd runs with --config-file, where it ignores command-line flags: its file "
                 "must say initial-cluster-state: existing and initial-cluster: %s",
                 m->initial_cluster);
    log_info("etcd starts as a learner with %s %s", m->argv_state, m->argv_ic);
    return m->argv_buf;
}

/* ---------- setup ---------- */

static void read_etcd_conf(EtcdConfigMember *fm, int *have) {
    *have = 0;
    const char *path = NULL;
    char *buf = NULL;
    size_t n = 0;
    int rc = etcd_config_read_file(&buf, &n, &path);
    if (rc == ERR_NOT_FOUND) return; /* no file: the flags and etcd's argv decide */
    if (!rc && etcd_config_member(buf, n, getenv("POD_NAME"), fm) == 0)
        *have = 1;
    else
        log_warn("etcd config file %s not used for this member's identity: %s", path, err_msg());
    free(buf);
}

/* The value of a flag given explicitly (flag_value, given), else etcd's command line, else the
 * etcd config file, else the flag's default (flag_value); malloc'ed. */
static char *pick(const char *flag, const char *flag_value, int given, char *const *argv,
                  const char *file_value) {
    const char *v = NULL;
    if (!given) {
        if (argv) v = etcd_argv_flag(argv, flag);
        if (!v && file_value && *file_value) v = file_value;
    }
    return strdup(v ? v : flag_value ? flag_value : "");
}

int member_ctl_new(const MemberFlags *f, const EtcdConfig *etcd, char *const *etcd_argv,
                   int64_t period_ms, atomic_int *stop, MemberCtl **out) {
    *out = NULL;
    MemberCtl *m = calloc(1, sizeof *m);
    if (!m) return EXIT_FAIL;
    m->etcd = *etcd;
    m->period_ms = period_ms > 0 ? period_ms : 5000;
    m->stop = stop;
    m->own_ep = strdup(etcd->n_endpoints ? etcd->endpoints[0] : "");
    EtcdConfigMember fm;
    int have_file = 0;
    read_etcd_conf(&fm, &have_file);
    char *name = pick("name", f->name, f->name_set, etcd_argv, have_file ? fm.name : NULL);
    char *peer = pick("initial-advertise-peer-urls", f->peer_urls, f->peer_urls_set, etcd_argv,
                      have_file ? fm.peer_urls : NULL);
    char *ic = pick("initial-cluster", f->initial_cluster, f->initial_cluster_set, etcd_argv,
                    have_file ? fm.initial_cluster : NULL);
    int rc = !m->own_ep || !name || !peer || !ic ? err_set(ERR_NOMEM, "out of memory") : 0;
    if (!rc) {
        snprintf(m->name, sizeof m->name, "%s", name);
        rc = split_into(peer, &m->peer, &m->n_peer);
    }
    char **ics = NULL;
    size_t n_ic = 0;
    if (!rc) rc = split_into(ic, &ics, &n_ic);
    free_list(ics, n_ic);
    m->ic_entries = n_ic;
    for (size_t i = 0; !rc && i < f->n_service_endpoints; i++)
        rc = split_into(f->service_endpoints[i], &m->cluster, &m->n_cluster);
    if (!rc && !m->n_cluster && have_file)
        rc = split_into(fm.client_urls, &m->cluster, &m->n_cluster);
    for (size_t i = 1; !rc && !m->n_cluster && i < etcd->n_endpoints; i++)
        rc = split_into(etcd->endpoints[i], &m->cluster, &m->n_cluster);
    FREE_ALL(name, peer, ic);
    if (!rc && !m->n_peer) rc = err_set(ERR_INVALID, "this member has no peer URLs");
    if (rc) {
        log_error("member: %s", err_msg());
        member_ctl_free(m);
        return EXIT_FAIL;
    }
    m->hooks = (InitMember){
        .ctx = m, .probe = probe, .remove_self = remove_self, .add_learner = add_learner};
    if (m->ic_entries > 1)
        log_info("member %s: peer URLs %s; initial cluster of %zu members; cluster reached "
                 "through %zu endpoints (%s...)",
                 m->name, m->peer[0], m->ic_entries, m->n_cluster,
                 m->n_cluster ? m->cluster[0] : "none");
    *out = m;
    return EXIT_OK;
}

const InitMember *member_ctl_init_hooks(MemberCtl *m) {
    return m ? &m->hooks : NULL;
}

void member_ctl_free(MemberCtl *m) {
    if (!m) return;
    free(m->own_ep);
    free_list(m->peer, m->n_peer);
    free_list(m->cluster, m->n_cluster);
    FREE_ALL(m->initial_cluster, m->argv_buf, m->argv_state, m->argv_ic, m);
}
