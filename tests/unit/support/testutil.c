/* testutil: see testutil.h. */
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

uint8_t *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("open %s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

void write_file(const char *path, const void *buf, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) fail_msg("create %s: %s", path, strerror(errno));
    if (len) assert_int_equal(fwrite(buf, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

int sh(char *out, size_t cap, const char *fmt, ...) {
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    char sink[4096];
    size_t used = 0;
    for (;;) {
        char *dst = out && used + 1 < cap ? out + used : sink;
        size_t room = out && used + 1 < cap ? cap - used - 1 : sizeof sink;
        size_t n = fread(dst, 1, room, p);
        if (n == 0) break;
        if (dst != sink) used += n;
    }
    if (out && cap) out[used] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int free_port(void) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(s, (struct sockaddr *)&a, &len) != 0) {
        if (s >= 0) close(s);
        return -1;
    }
    close(s);
    return ntohs(a.sin_port);
}

static int g_skipped;

void testutil_note_skip(const char *why) {
    const char *req = getenv("ETCDBR_REQUIRE_TOOLS");
    if (req && strcmp(req, "1") == 0)
        fail_msg("cannot run here, and ETCDBR_REQUIRE_TOOLS=1 requires it: %s", why);
    fprintf(stderr, "SKIP: %s\n", why);
    g_skipped++;
}

int testutil_exit(int failed) {
    if (failed) return failed == TESTUTIL_SKIP_EXIT || failed > 125 ? 1 : failed;
    if (g_skipped) {
        fprintf(stderr, "%d test(s) skipped: reported to ctest as skipped (exit %d)\n", g_skipped,
                TESTUTIL_SKIP_EXIT);
        return TESTUTIL_SKIP_EXIT;
    }
    return 0;
}
