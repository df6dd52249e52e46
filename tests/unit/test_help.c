/* test_help: the texts generated from the command list and the flag table: help wrapped at 100
 * columns with a hanging indent (every command's help and the top level), the completion
 * scripts naming every command, flag and allowed value, the man page's roff (known macros only,
 * every command and flag, hyphens escaped), and the version report's fields. The shells and
 * groff themselves run in tests/integration/test_help_cli.sh, test_completion.sh and
 * test_man_install.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cmd/commands.h"
#include "cmd/completion.h"
#include "cmd/help.h"
#include "cmd/manpage.h"
#include "cmd/opts.h"
#include "cmd/version.h"
#include "common/err.h"
#include "support/testutil.h"

#include <curl/curl.h>
#include <jansson.h>
#include <libdeflate.h>
#include <microhttpd.h>
#include <openssl/crypto.h>
#include <protobuf-c/protobuf-c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>
#include <zlib.h>
#include <zstd.h>

/* var: what call writes to FILE *f, as a string (owned). */
#define CAPTURE(var, call)                                                                         \
    char *var = NULL;                                                                              \
    do {                                                                                           \
        size_t len_ = 0;                                                                           \
        FILE *f = open_memstream(&var, &len_);                                                     \
        assert_non_null(f);                                                                        \
        call;                                                                                      \
        assert_int_equal(fclose(f), 0);                                                            \
    } while (0)

/* The limit the issue sets, written out: a change of HELP_WIDTH must fail here. */
#define MAX_COLUMNS 100

/* Fails naming the first line of text wider than MAX_COLUMNS or ending in a space. */
static void assert_lines_fit(const char *what, const char *text) {
    size_t line = 1;
    for (const char *p = text; *p; line++) {
        size_t len = strcspn(p, "\n");
        if (len > MAX_COLUMNS)
            fail_msg("%s: line %zu is %zu columns: \"%.*s\"", what, line, len, (int)len, p);
        if (len && p[len - 1] == ' ') fail_msg("%s: line %zu ends in a space", what, line);
        p += len + (p[len] == '\n');
    }
}

/* text with every run of spaces and newlines made one space, leading/trailing ones dropped */
static char *squeeze(const char *text) {
    char *out = malloc(strlen(text) + 1);
    size_t n = 0;
    for (const char *p = text; *p; p++) {
        if (*p == ' ' || *p == '\n') {
            if (n && out[n - 1] != ' ') out[n++] = ' ';
        } else {
            out[n++] = *p;
        }
    }
    while (n && out[n - 1] == ' ')
        n--;
    out[n] = '\0';
    return out;
}

static void test_wrap_hangs_at_the_indent_and_keeps_every_word(void **state) {
    (void)state;
    char text[2048];
    snprintf(text, sizeof text,
             "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron "
             "pi rho sigma tau upsilon phi chi psi omega %0120d end",
             0);
    CAPTURE(out, (fputs("      --some-flag string  ", f), help_wrap(f, text, 26, 30)));
    assert_lines_fit("wrapped", out);
    /* the first line goes on from column 26; every other one starts with exactly 30 spaces */
    assert_true(strncmp(out, "      --some-flag string  alpha beta", 36) == 0);
    int lines = 0;
    for (const char *p = strchr(out, '\n'); p && p[1]; p = strchr(p + 1, '\n')) {
        lines++;
        assert_int_equal(strspn(p + 1, " "), 30);
    }
    assert_true(lines >= 3); /* the 120-digit word is split over two lines */
    /* nothing lost or added: the words (the long one rejoined) are the input's */
    char *got = squeeze(out + 26);
    char *want = squeeze(text);
    char *digits = strstr(got, "000");
    assert_non_null(digits);
    char *nl = strchr(digits, ' '); /* the split word's two halves: rejoin them */
    assert_non_null(nl);
    memmove(nl, nl + 1, strlen(nl));
    assert_string_equal(got, want);
    free(got);
    free(want);
    free(out);
    /* text starting past the indent wraps before its first word when that does not fit */
    CAPTURE(late, (fprintf(f, "%95s", "x"), help_wrap(f, "longword", 95, 10)));
    assert_string_equal(late + 95, "\n          longword\n");
    free(late);
}

static void test_every_commands_help_fits_100_columns(void **state) {
    (void)state;
    size_t n = 0, nt = 0;
    const CmdInfo *c = cmd_infos(&n);
    const OptDef *t = opts_table(&nt);
    CAPTURE(top, help_print_usage(f));
    assert_lines_fit("etcdbrctl --help", top);
    for (size_t k = 0; k < n; k++) {
        char head[128];
        snprintf(head, sizeof head, "\n  %s ", c[k].name);
        if (!strstr(top, head)) fail_msg("the top-level help does not list %s", c[k].name);
        CAPTURE(help, help_print_command(f, &c[k]));
        char what[64];
        snprintf(what, sizeof what, "etcdbrctl %s --help", c[k].name);
        assert_lines_fit(what, help);
        snprintf(head, sizeof head, "\nUsage:\n  etcdbrctl %s", c[k].name);
        if (!strstr(help, head)) fail_msg("%s: no usage line", what);
        if (!strstr(help, "-h, --help")) fail_msg("%s: no -h, --help", what);
        /* every flag of the command, and no other */
        for (size_t i = 0; i < nt; i++) {
            char flag[96];
            int shown = 0; /* as "      --name " or "  -x, --name " (or "\n" after a long one) */
            for (int form = 0; form < 4; form++) {
                snprintf(flag, sizeof flag, "%s--%s%c", form % 2 ? ", " : "\n      ", t[i].name,
                         form < 2 ? ' ' : '\n');
                shown |= strstr(help, flag) != NULL;
            }
            if (shown != !!(t[i].commands & c[k].bit))
                fail_msg("%s: --%s is %s", what, t[i].name, shown ? "shown" : "missing");
        }
        free(help);
    }
    free(top);
}

/* The values of every flag with a fixed set appear in the script, and every command and flag. */
static void expect_script_names_everything(const char *shell, const char *script) {
    size_t n = 0, nt = 0;
    const CmdInfo *c = cmd_infos(&n);
    const OptDef *t = opts_table(&nt);
    for (size_t k = 0; k < n; k++)
        if (!strstr(script, c[k].name)) fail_msg("%s: command %s missing", shell, c[k].name);
    for (size_t i = 0; i < nt; i++) {
        char name[96];
        snprintf(name, sizeof name, strcmp(shell, "fish") ? "--%s" : "-l %s", t[i].name);
        if (!strstr(script, name)) fail_msg("%s: flag --%s missing", shell, t[i].name);
        for (size_t j = 0; t[i].choices && t[i].choices[j]; j++)
            if (t[i].choices[j][0] && !strstr(script, t[i].choices[j]))
                fail_msg("%s: value %s of --%s missing", shell, t[i].choices[j], t[i].name);
    }
}

static void test_completion_scripts_name_commands_flags_and_values(void **state) {
    (void)state;
    CAPTURE(bash, assert_int_equal(completion_write(f, "bash"), 0));
    expect_script_names_everything("bash", bash);
    assert_non_null(strstr(bash, "\ncomplete -F _etcdbrctl etcdbrctl\n"));
    assert_non_null(strstr(bash, "words=\"Local S3 ABS GCS Swift OSS ECS OCS\""));
    assert_non_null(strstr(bash, "words=\"gzip zlib lzw zstd\""));
    assert_non_null(strstr(bash, "-o|--output)\n            words=\"text json simple table\""));
    CAPTURE(zsh, assert_int_equal(completion_write(f, "zsh"), 0));
    expect_script_names_everything("zsh", zsh);
    assert_true(strncmp(zsh, "#compdef etcdbrctl\n", 19) == 0);
    assert_non_null(strstr(zsh, "'--storage-provider=[snapshot store provider]:string:(Local S3 "
                                "ABS GCS Swift OSS ECS OCS)'"));
    CAPTURE(fish, assert_int_equal(completion_write(f, "fish"), 0));
    expect_script_names_everything("fish", fish);
    assert_non_null(strstr(fish, "-s o -l output -x -a 'text json simple table'"));
    /* the single quotes of descriptions are escaped for each shell */
    assert_non_null(strstr(fish, "'the Go tool\\'s switch"));
    assert_non_null(strstr(zsh, "[the Go tool'\\''s switch"));
    free(bash);
    free(zsh);
    free(fish);
    CAPTURE(none, assert_int_equal(completion_write(f, "tcsh"), ERR_INVALID));
    assert_non_null(strstr(err_msg(), "\"tcsh\""));
    assert_string_equal(none, "");
    free(none);
}

/* The roff requests the page may use: man(7)'s, nothing groff-specific. */
static int known_request(const char *line) {
    static const char *const ok[] = {".\\\" ", ".TH ", ".SH ", ".SS ",  ".TP\n", ".PP\n",  ".B ",
                                     ".I ",    ".RI ", ".BR ", ".br\n", ".nh\n", ".ad l\n"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (!strncmp(line, ok[i], strlen(ok[i]))) return 1;
    return 0;
}

static void test_man_page_is_roff_with_every_command_and_flag(void **state) {
    (void)state;
    const BuildInfo bi = {"9.8.7", "0123456789ab", "2001-02-03T04:05:06Z"};
    CAPTURE(man, assert_int_equal(man_write(f, &bi), 0));
    assert_non_null(strstr(man, "\n.TH ETCDBRCTL 1 \"2001-02-03\" \"etcdbr 9.8.7\""));
    for (const char *p = man; *p; p = strchr(p, '\n') + 1) {
        if ((*p == '.' || *p == '\'') && !known_request(p))
            fail_msg("unknown request: %.*s", (int)strcspn(p, "\n"), p);
        size_t len = strcspn(p, "\n");
        int prose = strncmp(p, ".TH ", 4) && strncmp(p, ".\\\" ", 4); /* not the date, comments */
        for (size_t i = 0; prose && i < len; i++) /* every hyphen escaped: a copied flag works */
            if (p[i] == '-' && (i == 0 || p[i - 1] != '\\'))
                fail_msg("bare hyphen in: %.*s", (int)len, p);
        if (!p[len]) break;
    }
    size_t n = 0, nt = 0;
    const CmdInfo *c = cmd_infos(&n);
    const OptDef *t = opts_table(&nt);
    for (size_t k = 0; k < n; k++) {
        char ss[64];
        snprintf(ss, sizeof ss, "\n.SS \"etcdbrctl %s", c[k].name);
        if (!strstr(man, ss)) fail_msg("no section for %s", c[k].name);
    }
    for (size_t i = 0; i < nt; i++) {
        char flag[128] = "\\fB\\-\\-", *q = flag + strlen(flag);
        for (const char *s = t[i].name; *s && q < flag + sizeof flag - 3; s++)
            q += *s == '-' ? sprintf(q, "\\-") : sprintf(q, "%c", *s);
        if (!strstr(man, flag)) fail_msg("flag --%s missing", t[i].name);
    }
    assert_non_null(strstr(man, "\n.SH \"EXIT STATUS\"\n"));
    assert_non_null(strstr(man, "\n.B ETCD_USERNAME\n"));
    free(man);
}

static void expect_line(const char *text, const char *name, const char *value) {
    char line[512];
    snprintf(line, sizeof line, "\n%s: %s\n", name, value);
    if (!strstr(text, line)) fail_msg("no line \"%s: %s\" in:\n%s", name, value, text);
}

static void test_version_names_build_compiler_and_libraries(void **state) {
    (void)state;
    const BuildInfo bi = {"9.8.7", "0123456789ab-dirty", "2001-02-03T04:05:06Z"};
    CAPTURE(v, version_print(f, &bi));
    /* the first line keeps the shape scripts parse */
    assert_true(strncmp(v, "etcdbrctl version 9.8.7\n", 24) == 0);
    expect_line(v, "commit", "0123456789ab-dirty");
    expect_line(v, "build date", "2001-02-03T04:05:06Z");
    assert_true(strstr(v, "\ncompiler: gcc ") || strstr(v, "\ncompiler: clang "));
    /* the running libraries' own answers */
    expect_line(v, "libcurl", curl_version_info(CURLVERSION_NOW)->version);
    expect_line(v, "OpenSSL", OpenSSL_version(OPENSSL_VERSION_STRING));
    expect_line(v, "zlib", zlibVersion());
    expect_line(v, "libzstd", ZSTD_versionString());
    expect_line(v, "jansson", jansson_version_str());
    expect_line(v, "libmicrohttpd", MHD_get_version());
    expect_line(v, "protobuf-c", protobuf_c_version());
    expect_line(v, "libyaml", yaml_get_version_string());
    expect_line(v, "libdeflate", LIBDEFLATE_VERSION_STRING " (headers)");
    int lines = 0;
    for (const char *p = v; (p = strchr(p, '\n')); p++)
        lines++;
    assert_int_equal(lines, 13);
    free(v);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wrap_hangs_at_the_indent_and_keeps_every_word),
        cmocka_unit_test(test_every_commands_help_fits_100_columns),
        cmocka_unit_test(test_completion_scripts_name_commands_flags_and_values),
        cmocka_unit_test(test_man_page_is_roff_with_every_command_and_flag),
        cmocka_unit_test(test_version_names_build_compiler_and_libraries),
    };
    return testutil_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
