/* etcd_proc: a temporary single-member etcd on 127.0.0.1; see etcd_proc.h.
 * Ports come from binding port 0 and closing, so another process may grab one before etcd
 * binds it: an early exit is retried with fresh ports (a few times). Readiness = Status answers
 * through our own client and reports a leader. The child leads its own process group. */
#include "etcd_proc.h"

#include "common/err.h"
#include "etcd_client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define START_ATTEMPTS 3
#define STOP_WAIT_MS 10000
#define PROBE_INTERVAL_MS 50
#define MAX_ARGS 64

struct EtcdProc {
    pid_t pid;
    char client_url[64];
};

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

/* Two distinct free loopback ports (both sockets are open at once so they differ). */
static int pick_ports(int *a, int *b) {
    int fds[2] = {-1, -1}, ports[2] = {0, 0}, rc = 0;
    for (int i = 0; i < 2; i++) {
        struct sockaddr_in sa = {.sin_family = AF_INET};
        socklen_t sl = sizeof sa;
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fds[i] < 0 || bind(fds[i], (struct sockaddr *)&sa, sizeof sa) < 0 ||
            getsockname(fds[i], (struct sockaddr *)&sa, &sl) < 0) {
            rc =
                err_set(ERR_IO, "etcd_proc: cannot pick a free loopback port: %s", strerror(errno));
            goto done;
        }
        ports[i] = ntohs(sa.sin_port);
    }
    *a = ports[0];
    *b = ports[1];
done:
    for (int i = 0; i < 2; i++)
        if (fds[i] >= 0) close(fds[i]);
    return rc;
}

/* What etcd wrote since offset, for error messages: its first line (flag errors) and its
 * last lines (fatal errors), joined with '|'. */
static void log_tail(const char *path, off_t offset, char *out, size_t cap) {
    out[0] = 0;
    if (!path) {
        snprintf(out, cap, "(no log_path configured)");
        return;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    char head[256], tail[1024];
    ssize_t nh = pread(fd, head, sizeof head - 1, offset);
    struct stat st;
    ssize_t nt = 0;
    off_t start = offset;
    if (fstat(fd, &st) == 0 && st.st_size - (off_t)(sizeof tail - 1) > offset)
        start = st.st_size - (off_t)(sizeof tail - 1);
    nt = pread(fd, tail, sizeof tail - 1, start);
    close(fd);
    if (nh <= 0) return;
    head[nh] = 0;
    char *nl = strchr(head, '\n');
    if (nl) *nl = 0;
    if (nt < 0) nt = 0;
    tail[nt] = 0;
    /* the last 5 lines of tail, newlines turned into '|' */
    char *p = tail + nt;
    while (p > tail && (p[-1] == '\n' || p[-1] == '\r'))
        *--p = 0;
    int lines = 0;
    while (p > tail) {
        if (p[-1] == '\n' && ++lines == 5) break;
        p--;
    }
    for (char *q = p; *q; q++)
        if (*q == '\n') *q = '|';
    /* a short log: the first line is already in the tail */
    if (start == offset && strncmp(p, head, strlen(head)) == 0)
        snprintf(out, cap, "%s", p);
    else
        snprintf(out, cap, "%.200s|...|%.700s", head, p);
}

extern char **environ;

/* Our environment plus GOMAXPROCS/GOGC from cfg when not set already; NULL-terminated. The
 * strings point into environ or vars (no copies). NULL when out of memory. */
static char **child_env(const EtcdProcConfig *cfg, char vars[2][32]) {
    size_t n = 0;
    while (environ && environ[n])
        n++;
    char **env = calloc(n + 3, sizeof *env);
    if (!env) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        env[k++] = environ[i];
    if (cfg->gomaxprocs > 0 && !getenv("GOMAXPROCS")) {
        snprintf(vars[0], 32, "GOMAXPROCS=%d", cfg->gomaxprocs);
        env[k++] = vars[0];
    }
    if (cfg->gogc > 0 && !getenv("GOGC")) {
        snprintf(vars[1], 32, "GOGC=%d", cfg->gogc);
        env[k++] = vars[1];
    }
    env[k] = NULL;
    return env;
}

static int spawn(const EtcdProcConfig *cfg, char *const argv[], int log_fd, pid_t *pid_out) {
    char vars[2][32];
    char **env = child_env(cfg, vars);
    if (!env) return err_set(ERR_NOMEM, "etcd_proc: out of memory");
    int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_fd < 0) {
        free(env);
        return err_set(ERR_IO, "etcd_proc: open /dev/null: %s", strerror(errno));
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(null_fd);
        free(env);
        return err_set(ERR_IO, "etcd_proc: fork: %s", strerror(e));
    }
    if (pid == 0) {
        /* child: only async-signal-safe calls until exec */
        sigset_t all;
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&all);
        sigprocmask(SIG_SETMASK, &all, NULL);
        sigaction(SIGPIPE, &dfl, NULL);
        sigaction(SIGINT, &dfl, NULL);
        sigaction(SIGTERM, &dfl, NULL);
        setpgid(0, 0);
        /* a temporary etcd never outlives us (kill -9 of a restore must not leave it running
         * on a half-restored data dir) */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
        dup2(null_fd, 0);
        dup2(log_fd, 1);
        dup2(log_fd, 2);
        execvpe(argv[0], argv, env);
        static const char msg[] = "etcd_proc: exec failed: ";
        (void)!write(2, msg, sizeof msg - 1);
        (void)!write(2, argv[0], strlen(argv[0]));
        (void)!write(2, "\n", 1);
        _exit(127);
    }
    setpgid(pid, pid); /* also from the parent, so a stop right after start finds the group */
    close(null_fd);
    free(env);
    *pid_out = pid;
    return 0;
}

static int kill_and_reap(pid_t pid, int wait_ms, int *status) {
    int64_t deadline = now_ms() + wait_ms;
    kill(pid, SIGTERM);
    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid || (r < 0 && errno == ECHILD)) return r == pid ? 0 : -1;
        if (now_ms() >= deadline) break;
        sleep_ms(20);
    }
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    while (waitpid(pid, status, 0) < 0 && errno == EINTR) {
    }
    return 1;
}

/* Status answers and a leader exists: 1; not yet: 0. */
static int probe(const EtcdProcConfig *cfg, const char *url) {
    const char *eps[1] = {url};
    EtcdConfig ec = {
        .endpoints = eps,
        .n_endpoints = 1,
        .cacert = cfg->client_https ? cfg->probe_cacert : NULL,
        .cert = cfg->client_https ? cfg->probe_cert : NULL,
        .key = cfg->client_https ? cfg->probe_key : NULL,
        .insecure_skip_tls_verify = cfg->client_https && !cfg->probe_cacert,
        .connection_timeout_ms = 2000,
    };
    EtcdClient *c = NULL;
    EtcdStatus st;
    int ok = 0;
    if (etcd_client_new(&ec, &c) == 0 && etcd_status(c, &st) == 0 && st.leader != 0) ok = 1;
    etcd_client_free(c);
    return ok;
}

/* The etcd command line of one start attempt: argv points into the buffers beside it. */
typedef struct {
    char icl[320], snaps[32], num[4][32]; /* num: the optional numeric flags' values */
    char *argv[MAX_ARGS];
} EtcdArgs;

/* etcd's flags for cfg on client URL curl and peer URL purl, then cfg's n_extra extra_args
 * (n_extra <= MAX_ARGS - 32, checked by the caller). */
static void make_args(const EtcdProcConfig *cfg, const char *bin, const char *name,
                      const char *curl, const char *purl, size_t n_extra, EtcdArgs *a) {
    char **argv = a->argv;
    int n = 0;
#define ARG(s) argv[n++] = (char *)(s)
    snprintf(a->icl, sizeof a->icl, "%s=%s", name, purl);
    ARG(bin);
    ARG("--name");
    ARG(name);
    ARG("--data-dir");
    ARG(cfg->data_dir);
    ARG("--listen-client-urls");
    ARG(curl);
    ARG("--advertise-client-urls");
    ARG(curl);
    ARG("--listen-peer-urls");
    ARG(purl);
    ARG("--initial-advertise-peer-urls");
    ARG(purl);
    ARG("--initial-cluster");
    ARG(a->icl);
    snprintf(a->snaps, sizeof a->snaps, "%lld",
             (long long)(cfg->snapshot_count > 0 ? cfg->snapshot_count : 100000));
    ARG("--snapshot-count");
    ARG(a->snaps);
    /* each only when set (> 0), else etcd's default */
    const struct {
        int64_t value;
        const char *flag, *unit;
    } nums[4] = {
        {cfg->backend_batch_interval_ms, "--backend-batch-interval", "ms"},
        {cfg->quota_bytes, "--quota-backend-bytes", ""},
        {cfg->max_request_bytes, "--max-request-bytes", ""},
        {cfg->max_txn_ops, "--max-txn-ops", ""},
    };
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        if (nums[i].value <= 0) continue;
        snprintf(a->num[i], sizeof a->num[i], "%lld%s", (long long)nums[i].value, nums[i].unit);
        ARG(nums[i].flag);
        ARG(a->num[i]);
    }
    if (cfg->unsafe_no_fsync) ARG("--unsafe-no-fsync");
    for (size_t i = 0; i < n_extra; i++)
        ARG(cfg->extra_args[i]);
    argv[n] = NULL;
#undef ARG
}

int etcd_proc_start(const EtcdProcConfig *cfg, EtcdProc **out) {
    int rc = 0, log_fd = -1;
    EtcdProc *p = NULL;
    *out = NULL;
    if (!cfg || !cfg->data_dir || !*cfg->data_dir)
        return err_set(ERR_INVALID, "etcd_proc: data_dir is required");
    const char *bin = cfg->etcd_bin && *cfg->etcd_bin ? cfg->etcd_bin : getenv("ETCDBR_ETCD_BIN");
    if (!bin || !*bin) bin = "etcd";
    const char *name = cfg->name && *cfg->name ? cfg->name : "default";
    const char *log_path = cfg->log_path ? cfg->log_path : "/dev/null";
    const char *scheme = cfg->client_https ? "https" : "http";
    int64_t ready_ms = cfg->ready_timeout_ms > 0 ? cfg->ready_timeout_ms : 60000;
    size_t n_extra = 0;
    if (cfg->extra_args)
        while (cfg->extra_args[n_extra])
            n_extra++;
    if (n_extra > MAX_ARGS - 32) return err_set(ERR_INVALID, "etcd_proc: too many extra_args");

    log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) return err_set(ERR_IO, "etcd_proc: open log %s: %s", log_path, strerror(errno));
    if (!(p = calloc(1, sizeof *p))) {
        rc = err_set(ERR_NOMEM, "etcd_proc: out of memory");
        goto done;
    }

    for (int attempt = 1;; attempt++) {
        int cport = 0, pport = 0;
        if ((rc = pick_ports(&cport, &pport))) goto done;
        char curl_[64], purl[64];
        snprintf(curl_, sizeof curl_, "%s://127.0.0.1:%d", scheme, cport);
        snprintf(purl, sizeof purl, "http://127.0.0.1:%d", pport);
        EtcdArgs args;
        make_args(cfg, bin, name, curl_, purl, n_extra, &args);
        char **argv = args.argv;
        off_t log_off = lseek(log_fd, 0, SEEK_END);
        if (log_off < 0) log_off = 0;
        pid_t pid = -1;
        if ((rc = spawn(cfg, argv, log_fd, &pid))) goto done;
        snprintf(p->client_url, sizeof p->client_url, "%s", curl_);
        p->pid = pid;

        int64_t deadline = now_ms() + ready_ms;
        int exited = 0, status = 0;
        for (;;) {
            pid_t r = waitpid(pid, &status, WNOHANG);
            if (r == pid) {
                exited = 1;
                break;
            }
            if (probe(cfg, curl_)) {
                *out = p;
                p = NULL;
                rc = 0;
                goto done;
            }
            if (now_ms() >= deadline) break;
            sleep_ms(PROBE_INTERVAL_MS);
        }
        char tail[1024];
        if (!exited) {
            kill_and_reap(pid, 2000, &status);
            log_tail(cfg->log_path, log_off, tail, sizeof tail);
            rc = err_set(ERR_TIMEOUT,
                         "etcd_proc: %s (data dir %s) not ready on %s within %lld ms; log: %s", bin,
                         cfg->data_dir, curl_, (long long)ready_ms, tail);
            goto done;
        }
        log_tail(cfg->log_path, log_off, tail, sizeof tail);
        char how[48];
        if (WIFEXITED(status))
            snprintf(how, sizeof how, "exit code %d", WEXITSTATUS(status));
        else
            snprintf(how, sizeof how, "signal %d", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        rc = err_set(ERR_IO, "etcd_proc: %s (data dir %s) exited during start (%s); log: %s", bin,
                     cfg->data_dir, how, tail);
        /* exec failure will not heal; a port taken in the meantime will */
        if (attempt >= START_ATTEMPTS || (WIFEXITED(status) && WEXITSTATUS(status) == 127))
            goto done;
    }
done:
    if (log_fd >= 0) close(log_fd);
    free(p);
    return rc;
}

const char *etcd_proc_client_url(const EtcdProc *p) {
    return p->client_url;
}

pid_t etcd_proc_pid(const EtcdProc *p) {
    return p->pid;
}

int etcd_proc_stop(EtcdProc *p) {
    if (!p) return 0;
    int status = 0, rc = 0;
    int r = kill_and_reap(p->pid, STOP_WAIT_MS, &status);
    if (r < 0) {
        rc = err_set(ERR_IO, "etcd_proc: pid %d was already reaped", (int)p->pid);
    } else if (r > 0) {
        rc = err_set(ERR_TIMEOUT, "etcd_proc: pid %d ignored SIGTERM for %d ms; killed",
                     (int)p->pid, STOP_WAIT_MS);
    } else if (!((WIFEXITED(status) && WEXITSTATUS(status) == 0) ||
                 (WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM))) {
        /* etcd re-raises SIGTERM after its shutdown handlers, so that counts as clean */
        rc = err_set(ERR_IO, "etcd_proc: pid %d ended with %s %d", (int)p->pid,
                     WIFEXITED(status) ? "exit code" : "signal",
                     WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    }
    free(p);
    return rc;
}
