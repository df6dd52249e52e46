/* test_common: Go duration parsing, robfig-compatible cron schedules, the option parser, the
 * logger's whole lines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cmd/opts.h"
#include "common/cron.h"
#include "common/err.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "common/timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void test_duration_parses_go_forms(void **state) {
    (void)state;
    int64_t ms;
    assert_int_equal(duration_parse_ms("20s", &ms), 0);
    assert_int_equal(ms, 20000);
    assert_int_equal(duration_parse_ms("1h30m", &ms), 0);
    assert_int_equal(ms, 5400000);
    assert_int_equal(duration_parse_ms("1.5s", &ms), 0);
    assert_int_equal(ms, 1500);
    assert_int_equal(duration_parse_ms("500ms", &ms), 0);
    assert_int_equal(ms, 500);
    assert_int_equal(duration_parse_ms("0", &ms), 0);
    assert_int_equal(ms, 0);
    assert_int_equal(duration_parse_ms("2m3s", &ms), 0);
    assert_int_equal(ms, 123000);
}

static void test_duration_rejects_missing_unit_and_junk(void **state) {
    (void)state;
    int64_t ms;
    assert_int_equal(duration_parse_ms("20", &ms), ERR_INVALID);
    assert_int_equal(duration_parse_ms("soon", &ms), ERR_INVALID);
    assert_int_equal(duration_parse_ms("", &ms), ERR_INVALID);
    assert_int_equal(duration_parse_ms("1x", &ms), ERR_INVALID);
    assert_int_equal(duration_parse_ms("1..5s", &ms), ERR_INVALID);
}

static int64_t utc(int y, int mo, int d, int h, int mi) {
    struct tm tm = {
        .tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d, .tm_hour = h, .tm_min = mi};
    return (int64_t)timegm(&tm);
}

static void test_cron_hourly_default_schedule(void **state) {
    (void)state;
    CronSchedule s;
    assert_int_equal(cron_parse("CRON_TZ=UTC 0 */1 * * *", &s), 0);
    assert_int_equal(cron_next(&s, utc(2026, 11, 29, 18, 33)), utc(2026, 11, 29, 19, 0));
    assert_int_equal(cron_next(&s, utc(2026, 11, 29, 19, 0)), utc(2026, 11, 29, 20, 0));
    assert_int_equal(cron_next(&s, utc(2026, 12, 31, 23, 59)), utc(2027, 1, 1, 0, 0));
}

static void test_cron_every_third_day_and_names(void **state) {
    (void)state;
    CronSchedule s;
    assert_int_equal(cron_parse("TZ=UTC 0 0 */3 * *", &s), 0);
    assert_int_equal(cron_next(&s, utc(2026, 11, 29, 1, 0)), utc(2026, 12, 1, 0, 0));
    assert_int_equal(cron_parse("TZ=UTC 30 4 * jan-mar MON,fri", &s), 0);
    /* 2027-01-01 is a Friday */
    assert_int_equal(cron_next(&s, utc(2026, 11, 29, 0, 0)), utc(2027, 1, 1, 4, 30));
    /* day-of-month and day-of-week both restricted: either matches (robfig) */
    assert_int_equal(cron_parse("TZ=UTC 0 0 13 * 5", &s), 0);
    assert_int_equal(cron_next(&s, utc(2026, 11, 29, 0, 0)), utc(2026, 12, 4, 0, 0));
}

static void test_cron_descriptors_and_every(void **state) {
    (void)state;
    CronSchedule s;
    assert_int_equal(cron_parse("TZ=UTC @daily", &s), 0);
    assert_int_equal(cron_next(&s, utc(2026, 11, 29, 18, 0)), utc(2026, 11, 30, 0, 0));
    assert_int_equal(cron_parse("@every 90s", &s), 0);
    assert_int_equal(cron_next(&s, 1000), 1090);
    assert_int_equal(cron_parse("TZ=UTC 0 0 30 2 *", &s), 0);
    assert_int_equal(cron_next(&s, utc(2026, 1, 1, 0, 0)), -1);
}

static void test_cron_rejects_bad_fields(void **state) {
    (void)state;
    CronSchedule s;
    assert_int_equal(cron_parse("* * * *", &s), ERR_INVALID);
    assert_int_equal(cron_parse("60 * * * *", &s), ERR_INVALID);
    assert_int_equal(cron_parse("* 24 * * *", &s), ERR_INVALID);
    assert_int_equal(cron_parse("*/0 * * * *", &s), ERR_INVALID);
    assert_int_equal(cron_parse("@sometimes", &s), ERR_INVALID);
    assert_int_equal(cron_parse("5-1 * * * *", &s), ERR_INVALID);
    assert_int_equal(cron_parse("CRON_TZ=Mars/Olympus 0 * * * *", &s), ERR_UNSUPPORTED);
}

static void test_opts_parse_pflag_forms_and_defaults(void **state) {
    (void)state;
    char *argv[] = {"--endpoints=http://a:1,http://b:2",
                    "-e",
                    "http://c:3",
                    "--compress-snapshots=false",
                    "--schedule",
                    "@hourly",
                    "--delta-snapshot-period=2s",
                    "--etcd-password=secret"};
    Opts *o = NULL;
    int help = 0;
    assert_int_equal(opts_parse(CMD_SNAPSHOT, 8, argv, &o, &help), 0);
    size_t n;
    const char *const *eps = opt_list(o, "endpoints", &n);
    assert_int_equal(n, 3);
    assert_string_equal(eps[2], "http://c:3");
    assert_int_equal(opt_bool(o, "compress-snapshots"), 0);
    assert_string_equal(opt_str(o, "schedule"), "@hourly");
    assert_int_equal(opt_duration_ms(o, "delta-snapshot-period"), 2000);
    assert_int_equal(opt_int(o, "delta-snapshot-memory-limit"), 10485760);
    assert_int_equal(opt_bool(o, "insecure-skip-tls-verify"), 0);
    assert_string_equal(opt_str(o, "compression-policy"), "gzip");
    opts_free(o);
}

static void test_opts_rejects_unknown_flag_and_bad_values(void **state) {
    (void)state;
    Opts *o = NULL;
    int help = 0;
    char *a1[] = {"--nope"};
    assert_int_equal(opts_parse(CMD_RESTORE, 1, a1, &o, &help), ERR_INVALID);
    assert_non_null(strstr(err_msg(), "--nope"));
    char *a2[] = {"--max-fetchers=many"};
    assert_int_equal(opts_parse(CMD_RESTORE, 1, a2, &o, &help), ERR_INVALID);
    char *a3[] = {"--schedule", "@hourly"}; /* a snapshot flag is not a restore flag */
    assert_int_equal(opts_parse(CMD_RESTORE, 2, a3, &o, &help), ERR_INVALID);
    char *a4[] = {"--data-dir"};
    assert_int_equal(opts_parse(CMD_RESTORE, 1, a4, &o, &help), ERR_INVALID);
    char *a5[] = {"stray"};
    assert_int_equal(opts_parse(CMD_RESTORE, 1, a5, &o, &help), ERR_INVALID);
}

static void test_fs_join_and_dirname(void **state) {
    (void)state;
    char *p = fs_join("a/", "/b");
    assert_string_equal(p, "a/b");
    free(p);
    p = fs_join("", "v2");
    assert_string_equal(p, "v2");
    free(p);
    p = fs_dirname("/x/y/z");
    assert_string_equal(p, "/x/y");
    free(p);
}

static void touch(const char *dir, const char *name) {
    char *p = fs_join(dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs("x", f);
    fclose(f);
    free(p);
}

static int present(const char *dir, const char *name) {
    char *p = fs_join(dir, name);
    int r = fs_exists(p);
    free(p);
    return r;
}

static void count_removed(void *ctx, const char *path, int64_t bytes) {
    (void)path;
    assert_int_equal(bytes, 1);
    ++*(int *)ctx;
}

static void test_fs_remove_stale_temp_removes_only_unlocked_files_of_ours(void **state) {
    (void)state;
    char dir[] = "/tmp/etcdbr-ut.XXXXXX";
    assert_non_null(mkdtemp(dir));
    touch(dir, "tmp-AbC123"); /* stale: ours, nobody holds it */
    touch(dir, "tmp-AbC12");  /* 5 characters: not a mkstemp name */
    touch(dir, "tmp-AbC1234");
    touch(dir, "tmp-AbC-23"); /* '-' is not among mkstemp's characters */
    touch(dir, "other");
    char *sub = fs_join(dir, "tmp-DIR123");
    assert_int_equal(mkdir(sub, 0700), 0);
    touch(sub, "tmp-INSIDE"); /* never recursed into */
    char *target = fs_join(dir, "other");
    char *link = fs_join(dir, "tmp-LNK123");
    assert_int_equal(symlink(target, link), 0);
    char *live = NULL;
    int fd = fs_mkstemp_locked(dir, "tmp-", &live); /* a live writer (this process) */
    assert_true(fd >= 0);
    int removed = -1, logged = 0;
    assert_int_equal(fs_remove_stale_temp(dir, "tmp-", count_removed, &logged, &removed), 0);
    assert_int_equal(removed, 1);
    assert_int_equal(logged, 1);
    assert_false(present(dir, "tmp-AbC123"));
    assert_true(fs_exists(live));
    assert_true(present(dir, "tmp-AbC12"));
    assert_true(present(dir, "tmp-AbC1234"));
    assert_true(present(dir, "tmp-AbC-23"));
    assert_true(present(dir, "other"));
    assert_true(present(sub, "tmp-INSIDE"));
    assert_true(fs_exists(link));
    /* once its owner lets go (closes, or is killed), it is stale */
    close(fd);
    assert_int_equal(fs_remove_stale_temp(dir, "tmp-", NULL, NULL, &removed), 0);
    assert_int_equal(removed, 1);
    assert_false(fs_exists(live));
    /* a missing directory holds nothing stale */
    assert_int_equal(fs_remove_stale_temp("/nonexistent/etcdbr", "tmp-", NULL, NULL, &removed), 0);
    assert_int_equal(removed, 0);
    free(live);
    free(link);
    free(target);
    free(sub);
    assert_int_equal(fs_remove_tree(dir), 0);
}

/* fs_mkdir_p makes every directory it creates durable: the parent of each created level is
 * fsynced (counted through the fsutil test hook), and levels that existed are not. */
typedef struct {
    char dirs[8][512];
    int n;
} FsyncLog;

static void log_fsync(void *ctx, const char *dir) {
    FsyncLog *l = ctx;
    if (l->n < 8) snprintf(l->dirs[l->n], sizeof l->dirs[0], "%s", dir);
    l->n++;
}

static void test_fs_mkdir_p_fsyncs_the_parent_of_each_created_level(void **state) {
    (void)state;
    char dir[] = "/tmp/etcdbr-ut.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char want[512], path[512];
    snprintf(path, sizeof path, "%s/a/b/c", dir);
    FsyncLog l = {.n = 0};
    fs_set_fsync_dir_hook(log_fsync, &l);
    assert_int_equal(fs_mkdir_p(path, 0700), 0);
    assert_int_equal(l.n, 3);
    assert_string_equal(l.dirs[0], dir);
    snprintf(want, sizeof want, "%s/a", dir);
    assert_string_equal(l.dirs[1], want);
    snprintf(want, sizeof want, "%s/a/b", dir);
    assert_string_equal(l.dirs[2], want);
    l.n = 0; /* nothing created: nothing to fsync */
    assert_int_equal(fs_mkdir_p(path, 0700), 0);
    assert_int_equal(l.n, 0);
    snprintf(path, sizeof path, "%s/a/b/d/", dir); /* a trailing '/' creates one level */
    assert_int_equal(fs_mkdir_p(path, 0700), 0);
    assert_int_equal(l.n, 1);
    snprintf(want, sizeof want, "%s/a/b", dir);
    assert_string_equal(l.dirs[0], want);
    /* a rename fsyncs both directories */
    l.n = 0;
    char from[512], to[512];
    snprintf(from, sizeof from, "%s/a/b/c", dir);
    snprintf(to, sizeof to, "%s/c", dir);
    assert_int_equal(fs_rename_durable(from, to), 0);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.dirs[0], dir);
    assert_string_equal(l.dirs[1], want);
    /* and never replaces: not even an empty directory */
    snprintf(from, sizeof from, "%s/a/b/d", dir);
    assert_int_equal(fs_rename_durable(from, to), ERR_EXISTS);
    assert_true(fs_exists(from));
    fs_set_fsync_dir_hook(NULL, NULL);
    assert_int_equal(fs_remove_tree(dir), 0);
}

/* A scratch path is removed only when etcdbr made it (its marker inside); anything else there
 * is left as it is, with an error that names it and says what to do. */
static void test_fs_scratch_dir_remove_only_takes_marked_dirs(void **state) {
    (void)state;
    char dir[] = "/tmp/etcdbr-ut.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[512], inner[600];
    snprintf(path, sizeof path, "%s/dd.part", dir);
    assert_int_equal(fs_scratch_dir_make(path, "test\n"), 0);
    assert_int_equal(fs_scratch_dir_make(path, "test\n"), ERR_EXISTS);
    touch(path, "partial");
    assert_int_equal(fs_scratch_dir_remove(path, "a test"), 0);
    assert_false(fs_exists(path));
    assert_int_equal(fs_scratch_dir_remove(path, "a test"), 0); /* absent: nothing to do */
    assert_int_equal(mkdir(path, 0700), 0); /* empty: nothing to lose (a crash before marking) */
    assert_int_equal(fs_scratch_dir_remove(path, "a test"), 0);
    assert_false(fs_exists(path));
    /* the operator's: a directory without the marker, a file, a symlink to a marked dir */
    assert_int_equal(mkdir(path, 0700), 0);
    touch(path, "mine");
    assert_int_equal(fs_scratch_dir_remove(path, "a test"), ERR_EXISTS);
    assert_non_null(strstr(err_msg(), path));
    assert_non_null(strstr(err_msg(), "never removed"));
    assert_true(present(path, "mine"));
    snprintf(inner, sizeof inner, "%s/%s", path, FS_SCRATCH_MARKER); /* a marker dir is no marker */
    assert_int_equal(mkdir(inner, 0700), 0);
    assert_int_equal(fs_scratch_dir_remove(path, "a test"), ERR_EXISTS);
    assert_true(present(path, "mine"));
    snprintf(inner, sizeof inner, "%s/marked", dir);
    assert_int_equal(fs_scratch_dir_make(inner, "test\n"), 0);
    snprintf(path, sizeof path, "%s/link.part", dir);
    assert_int_equal(symlink(inner, path), 0);
    assert_int_equal(fs_scratch_dir_remove(path, "a test"), ERR_EXISTS);
    assert_true(present(inner, FS_SCRATCH_MARKER));
    snprintf(path, sizeof path, "%s/file.part", dir);
    touch(dir, "file.part");
    assert_int_equal(fs_scratch_dir_remove(path, "a test"), ERR_EXISTS);
    assert_true(fs_exists(path));
    assert_int_equal(fs_remove_tree(dir), 0);
}

/* A directory in the temp dir named like a scratch directory of ours but without our marker is
 * the operator's: fs_scratch_create's cleanup of stale ones leaves it (before, one without a
 * lock file was removed once a minute old). A stale one of ours (marker, lock free) goes. */
static void test_fs_scratch_create_cleans_only_marked_stale_dirs(void **state) {
    (void)state;
    char dir[] = "/tmp/etcdbr-ut.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char user[512], old[512];
    snprintf(user, sizeof user, "%s/etcdbr-x.AbC123", dir);
    assert_int_equal(mkdir(user, 0700), 0);
    touch(user, "keep");
    struct timespec t[2] = {{.tv_sec = time(NULL) - 3600}, {.tv_sec = time(NULL) - 3600}};
    assert_int_equal(utimensat(AT_FDCWD, user, t, 0), 0);
    char *s1 = NULL;
    int fd1 = -1;
    assert_int_equal(fs_scratch_create(dir, "etcdbr-x.", "test", &s1, &fd1, NULL), 0);
    snprintf(old, sizeof old, "%s", s1);
    close(fd1); /* its owner is gone */
    free(s1);
    assert_int_equal(fs_scratch_create(dir, "etcdbr-x.", "test", &s1, &fd1, NULL), 0);
    assert_true(present(user, "keep"));
    assert_false(fs_exists(old));
    assert_true(present(s1, FS_SCRATCH_MARKER));
    close(fd1);
    free(s1);
    assert_int_equal(fs_remove_tree(dir), 0);
}

/* What an owner killed at any point of fs_scratch_create leaves is removed by the next one at
 * once, not a minute later: the empty directory of one killed right after mkdtemp, and the
 * marked directory of one killed before it locked it. A directory whose lock file a live
 * process holds the flock of (another owner) is kept, whatever it holds. */
static void test_fs_scratch_create_cleans_what_a_kill_leaves_at_once(void **state) {
    (void)state;
    char dir[] = "/tmp/etcdbr-ut.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char empty[512], marked[512], live[512];
    snprintf(empty, sizeof empty, "%s/etcdbr-x.Empty1", dir);
    snprintf(marked, sizeof marked, "%s/etcdbr-x.Mark01", dir);
    snprintf(live, sizeof live, "%s/etcdbr-x.Live01", dir);
    assert_int_equal(mkdir(empty, 0700), 0);
    assert_int_equal(mkdir(marked, 0700), 0);
    touch(marked, FS_SCRATCH_MARKER);
    assert_int_equal(mkdir(live, 0700), 0);
    touch(live, "owner.lock");
    char live_lock[600];
    snprintf(live_lock, sizeof live_lock, "%s/owner.lock", live);
    int live_fd = open(live_lock, O_RDONLY);
    assert_true(live_fd >= 0);
    assert_int_equal(flock(live_fd, LOCK_EX), 0);
    char *s1 = NULL;
    int fd1 = -1;
    assert_int_equal(fs_scratch_create(dir, "etcdbr-x.", "test", &s1, &fd1, NULL), 0);
    assert_false(fs_exists(empty));
    assert_false(fs_exists(marked));
    assert_true(fs_exists(live));
    /* the new one is locked: a second creator keeps it */
    char *s2 = NULL;
    int fd2 = -1;
    assert_int_equal(fs_scratch_create(dir, "etcdbr-x.", "test", &s2, &fd2, NULL), 0);
    assert_true(present(s1, FS_SCRATCH_MARKER));
    close(fd1);
    close(fd2);
    close(live_fd);
    free(s1);
    free(s2);
    assert_int_equal(fs_remove_tree(dir), 0);
}

/* A temp dir that fs_scratch_create made (the default relative "default.restoration.tmp") goes
 * when its last scratch directory goes; one that existed before (the user's) stays, even empty;
 * one that another scratch directory still uses stays. */
static void test_fs_scratch_temp_dir_made_is_removed_after_use(void **state) {
    (void)state;
    char dir[] = "/tmp/etcdbr-ut.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char temp[512];
    snprintf(temp, sizeof temp, "%s/default.restoration.tmp", dir);
    char *s1 = NULL, *s2 = NULL;
    int fd1 = -1, fd2 = -1, made1 = -1, made2 = -1;
    assert_int_equal(fs_scratch_create(temp, "etcdbr-x.", "test", &s1, &fd1, &made1), 0);
    assert_int_equal(made1, 1);
    assert_int_equal(fs_scratch_create(temp, "etcdbr-x.", "test", &s2, &fd2, &made2), 0);
    assert_int_equal(made2, 0);
    assert_int_equal(fs_remove_marked_tree(s1, FS_SCRATCH_MARKER), 0);
    fs_scratch_temp_dir_release(temp, made1);
    assert_true(fs_exists(temp)); /* s2 is still in it */
    assert_int_equal(fs_remove_marked_tree(s2, FS_SCRATCH_MARKER), 0);
    fs_scratch_temp_dir_release(temp, made2);
    assert_true(fs_exists(temp)); /* not made by s2's creator */
    fs_scratch_temp_dir_release(temp, made1);
    assert_false(fs_exists(temp));
    close(fd1);
    close(fd2);
    free(s1);
    free(s2);
    assert_int_equal(fs_remove_tree(dir), 0);
}

/* Under `run`, etcd writes to the same stderr as etcdbr: a log line written piecewise got etcd's
 * lines spliced into it (seen in CI: a test's grep for "promoted member m2 (" missed). Another
 * process writes its own lines to the same file description while this one logs; every line of
 * the file must be one or the other, whole. */
static void test_log_lines_stay_whole_beside_another_writer(void **state) {
    (void)state;
    char path[] = "/tmp/etcdbr-test-log-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    fflush(stderr);
    assert_int_equal(dup2(fd, STDERR_FILENO), STDERR_FILENO);
    enum { CHILD_LINES = 4000, LOG_LINES = 400 };
    static const char child_line[] = "etcd: some other process's line\n";
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        for (int i = 0; i < CHILD_LINES; i++)
            if (write(STDERR_FILENO, child_line, sizeof child_line - 1) < 0) _exit(1);
        _exit(0);
    }
    char msg[600];
    memset(msg, 'm', sizeof msg - 1);
    msg[sizeof msg - 1] = '\0';
    static const char head[] = "promoted \"member\"\tm2\n(";
    memcpy(msg, head, sizeof head - 1);
    for (int i = 0; i < LOG_LINES; i++)
        log_info("%s %d", msg, i);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    fflush(stderr);
    assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
    close(saved);

    FILE *f = fdopen(fd, "r");
    assert_non_null(f);
    rewind(f);
    static char line[4096];
    int child = 0, logged = 0, other = 0;
    const char *quoted = "msg=\"promoted \\\"member\\\"\\tm2\\n(mmmm";
    while (fgets(line, sizeof line, f)) {
        if (strcmp(line, child_line) == 0) {
            child++;
        } else if (strncmp(line, "time=\"", 6) == 0 && strstr(line, quoted) &&
                   strstr(line, "mmm ") && line[strlen(line) - 2] == '"') {
            logged++;
        } else {
            if (other++ < 3) fprintf(stderr, "spliced line: %.200s\n", line);
        }
    }
    fclose(f);
    assert_int_equal(other, 0);
    assert_int_equal(child, CHILD_LINES);
    assert_int_equal(logged, LOG_LINES);
}

/* The free-space reserve: against the real free space of /tmp's file system (statvfs), a reserve
 * above it refuses naming the directory, the free bytes and both flags; none or a small one
 * passes; the guard asks statvfs again only every FS_GUARD_EVERY bytes. */
static void test_fs_free_reserve_refuses_below_the_reserve_and_names_the_flags(void **state) {
    (void)state;
    char dir[] = "/tmp/etcdbr-ut.XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct statvfs sv;
    assert_int_equal(statvfs(dir, &sv), 0);
    uint64_t avail = (uint64_t)sv.f_bavail * sv.f_frsize;
    fs_set_free_reserve(0, 0);
    assert_int_equal(fs_check_free_reserve(dir, 0), 0);
    fs_set_free_reserve(avail + (1ull << 40), 0);
    assert_int_equal(fs_check_free_reserve(dir, 0), ERR_IO);
    assert_non_null(strstr(err_msg(), dir));
    assert_non_null(strstr(err_msg(), "bytes free"));
    assert_non_null(strstr(err_msg(), "--min-free-disk-bytes"));
    assert_non_null(strstr(err_msg(), "--min-free-disk-percent"));
    FsSpaceGuard g = {dir, 0};
    assert_int_equal(fs_space_guard_check(&g, 0), ERR_IO);             /* the first call checks */
    assert_int_equal(fs_space_guard_check(&g, FS_GUARD_EVERY - 1), 0); /* not yet again */
    assert_int_equal(fs_space_guard_check(&g, FS_GUARD_EVERY), ERR_IO);
    fs_set_free_reserve(0, 100); /* all of the file system: never free */
    assert_int_equal(fs_check_free_reserve(dir, 0), ERR_IO);
    fs_set_free_reserve(4096, 0); /* a small reserve: passes while the disk is not full */
    assert_int_equal(fs_check_free_reserve(dir, 1), 0);
    assert_int_equal(fs_check_free_reserve("/nonexistent/etcdbr", 0), ERR_IO); /* statvfs fails */
    fs_set_free_reserve(FS_RESERVE_BYTES_DEFAULT, FS_RESERVE_PERCENT_DEFAULT);
    rmdir(dir);
}

/* The process stop flag ends sleep_noted at once; a transfer is aborted by stop_stall_abort only
 * once stopping and only after STOP_STALL_MS without a byte (one that moves goes on). */
static void test_stop_flag_ends_sleeps_and_stalled_transfers(void **state) {
    (void)state;
    atomic_int *stop = process_stop_flag();
    atomic_store(stop, 0);
    StopStall st = {0};
    assert_int_equal(stop_stall_abort(&st, 0), 0);
    assert_int_equal(sleep_noted(1, NULL), 0);
    struct timespec ts = {0, (STOP_STALL_MS + 50) * 1000000L};
    nanosleep(&ts, NULL);
    assert_int_equal(stop_stall_abort(&st, 0), 0); /* stalled, but no stop yet */
    atomic_store(stop, 1);
    assert_int_equal(stop_stall_abort(&st, 10), 0); /* moved: goes on */
    assert_int_equal(stop_stall_abort(&st, 10), 0); /* not stalled long enough yet */
    nanosleep(&ts, NULL);
    assert_int_equal(stop_stall_abort(&st, 10), 1);
    assert_int_equal(st.aborted, 1); /* sticky: the transfer reports ERR_CANCELED */
    int64_t t0 = now_mono_ms();
    assert_int_equal(sleep_noted(60000, "nothing"), 1);
    assert_true(now_mono_ms() - t0 < 1000);
    assert_int_equal(sleep_unless_stopped(stop, 60000), 1);
    atomic_store(stop, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fs_free_reserve_refuses_below_the_reserve_and_names_the_flags),
        cmocka_unit_test(test_stop_flag_ends_sleeps_and_stalled_transfers),
        cmocka_unit_test(test_duration_parses_go_forms),
        cmocka_unit_test(test_duration_rejects_missing_unit_and_junk),
        cmocka_unit_test(test_cron_hourly_default_schedule),
        cmocka_unit_test(test_cron_every_third_day_and_names),
        cmocka_unit_test(test_cron_descriptors_and_every),
        cmocka_unit_test(test_cron_rejects_bad_fields),
        cmocka_unit_test(test_opts_parse_pflag_forms_and_defaults),
        cmocka_unit_test(test_opts_rejects_unknown_flag_and_bad_values),
        cmocka_unit_test(test_fs_join_and_dirname),
        cmocka_unit_test(test_fs_remove_stale_temp_removes_only_unlocked_files_of_ours),
        cmocka_unit_test(test_fs_mkdir_p_fsyncs_the_parent_of_each_created_level),
        cmocka_unit_test(test_fs_scratch_dir_remove_only_takes_marked_dirs),
        cmocka_unit_test(test_fs_scratch_create_cleans_only_marked_stale_dirs),
        cmocka_unit_test(test_fs_scratch_create_cleans_what_a_kill_leaves_at_once),
        cmocka_unit_test(test_fs_scratch_temp_dir_made_is_removed_after_use),
        cmocka_unit_test(test_log_lines_stay_whole_beside_another_writer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
