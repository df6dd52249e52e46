/* restore_write: see restore_write.h. */
#include "restore_write.h"
#include "restore_stage.h"
#include "../common/err.h"
#include "../common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int run_tool(char *const argv[], const char *log_path, atomic_int *stop) {
    pid_t pid = fork();
    if (pid < 0) return err_set(ERR_IO, "fork: %s", strerror(errno));
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a killed restore leaves no tool running */
        int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        setenv("ETCDCTL_API", "3", 1);
        execvp(argv[0], argv);
        fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int st, forwarded = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        if (stop && *stop && !forwarded) { /* the tool stops with us */
            kill(pid, SIGTERM);
            forwarded = 1;
        }
    }
    if (forwarded) return err_set(ERR_CANCELED, "restore stopped by a signal during %s", argv[0]);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
    char tail[600] = "";
    int fd = open(log_path, O_RDONLY);
    if (fd >= 0) {
        off_t end = lseek(fd, 0, SEEK_END);
        off_t from = end > (off_t)sizeof tail - 1 ? end - (off_t)sizeof tail + 1 : 0;
        ssize_t n = pread(fd, tail, sizeof tail - 1, from);
        tail[n > 0 ? n : 0] = '\0';
        close(fd);
        for (char *p = tail; *p; p++)
            if (*p == '\n') *p = ' ';
    }
    return err_set(ERR_IO, "%s snapshot restore failed (exit %d): %s", argv[0],
                   WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), tail);
}

static int fsync_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)ftw;
    int fd = open(path, (flag == FTW_D || flag == FTW_DP) ? O_RDONLY | O_DIRECTORY : O_RDONLY);
    if (fd < 0) return 1;
    int rc = fsync(fd);
    close(fd);
    return rc != 0;
}

/* Our member dirs: member 0's db was built in place (db_path); every other member gets a copy
 * of it, then each its WAL and snap file (memberdir.h), everything fsynced. */
static int write_member_dirs(const RestoreConfig *cfg, const RestoreMember *ms, size_t nm,
                             char **part_data, const InitialCluster *ic, const char *db_path) {
    int rc = 0;
    for (size_t i = 0; i < nm && !rc; i++) {
        if ((rc = restore_stopped(cfg->stop))) break;
        if (i > 0 && !(rc = memberdir_make_dirs(part_data[i])))
            rc = memberdir_copy_db(db_path, part_data[i]);
        if (!rc) rc = memberdir_write_raft(part_data[i], ic, ms[i].name);
        if (rc && nm > 1) rc = err_wrap(rc, "member %s", ms[i].name);
        if (!rc && nm > 1)
            log_info("member %s: member dir written to %s (peer URLs %s)", ms[i].name, part_data[i],
                     ms[i].peer_urls);
    }
    return rc;
}

/* --etcdutl-bin (a fallback, off by default): etcd's own tool writes each member dir from the
 * db at db_path (which it copies), its output in tool_log; every member dir fsynced after. */
static int run_restore_tool(const RestoreConfig *cfg, const RestoreMember *ms, size_t nm,
                            char **parts, char **part_data, const char *db_path,
                            const char *tool_log) {
    for (size_t i = 0; i < nm; i++) {
        char *argv[20];
        int a = 0, rc;
        argv[a++] = (char *)cfg->etcdutl_bin;
        argv[a++] = "snapshot";
        argv[a++] = "restore";
        argv[a++] = (char *)db_path; /* the tool copies it; every member gets the same db */
        argv[a++] = "--name";
        argv[a++] = (char *)ms[i].name;
        argv[a++] = "--initial-cluster";
        argv[a++] = (char *)cfg->initial_cluster;
        argv[a++] = "--initial-cluster-token";
        argv[a++] = (char *)cfg->initial_cluster_token;
        argv[a++] = "--initial-advertise-peer-urls";
        argv[a++] = (char *)ms[i].peer_urls;
        argv[a++] = "--data-dir";
        argv[a++] = part_data[i];
        /* our db has no sha256 trailer; a full snapshot's trailer was checked by fetch_full (the
         * tool then only cuts it off) */
        argv[a++] = "--skip-hash-check";
        argv[a] = NULL;
        if ((rc = restore_stopped(cfg->stop))) return rc;
        rc = run_tool(argv, tool_log, cfg->stop);
        if (!rc)
            rc = restore_stopped(
                cfg->stop); /* a signal during the tool: not committed yet, so clean up */
        if (rc) return nm > 1 ? err_wrap(rc, "member %s", ms[i].name) : rc;
        if (nftw(parts[i], fsync_cb, 32, FTW_PHYS) != 0)
            return err_set(ERR_IO, "fsync %s: %s", parts[i], strerror(errno));
        if (nm > 1)
            log_info("member %s: member dir written to %s by %s (peer URLs %s)", ms[i].name,
                     part_data[i], cfg->etcdutl_bin, ms[i].peer_urls);
    }
    return 0;
}

int restore_write_plan(const RestoreConfig *cfg, const RestoreMember *ms, size_t nm,
                       InitialCluster *ic, MemberDbItems *items, int *refused) {
    const char *token = cfg->initial_cluster_token ? cfg->initial_cluster_token : "";
    int rc = initial_cluster_parse(cfg->initial_cluster ? cfg->initial_cluster : "", token, ic);
    for (size_t i = 0; !rc && i < nm; i++) {
        const char *urls = ms[i].peer_urls && *ms[i].peer_urls ? ms[i].peer_urls : NULL;
        rc = memberdir_check(ic, ms[i].name, urls);
    }
    if (!rc) rc = memberdir_db_items(ic, items);
    if (rc == ERR_INVALID) *refused = 1;
    return rc;
}

int restore_write_members(const RestoreConfig *cfg, const RestoreMember *ms, size_t n, char **parts,
                          char **part_data, const InitialCluster *ic, const char *db_path,
                          const char *tool_log) {
    if (cfg->etcdutl_bin && *cfg->etcdutl_bin)
        return run_restore_tool(cfg, ms, n, parts, part_data, db_path, tool_log);
    return write_member_dirs(cfg, ms, n, part_data, ic, db_path);
}
