/* completion: the shell completion scripts; see completion.h. Every script is generated from
 * cmd_infos() and opts_table(), so a new command, flag or allowed value completes without an
 * edit here. */
#include "completion.h"
#include "commands.h"
#include "cmd.h"
#include "../common/err.h"

#include <errno.h>
#include <string.h>

#define TOP_FLAGS "-h --help -v --version"
#define SHELLS "bash zsh fish"

/* "server run": the names of the commands whose bit is in mask, space-separated. */
static void names_of(unsigned mask, char *out, size_t cap) {
    size_t n = 0, nc = 0;
    const CmdInfo *c = cmd_infos(&nc);
    out[0] = '\0';
    for (size_t i = 0; i < nc && n < cap; i++) {
        if (!(c[i].bit & mask)) continue;
        int w = snprintf(out + n, cap - n, "%s%s", n ? " " : "", c[i].name);
        if (w < 0 || (size_t)w >= cap - n) break;
        n += (size_t)w;
    }
}

/* Every command's name but skip's (NULL: none), space-separated. */
static void all_names(const char *skip, char *out, size_t cap) {
    size_t n = 0, nc = 0;
    const CmdInfo *c = cmd_infos(&nc);
    out[0] = '\0';
    for (size_t i = 0; i < nc; i++) {
        if (skip && !strcmp(c[i].name, skip)) continue;
        int w = snprintf(out + n, cap - n, "%s%s", n ? " " : "", c[i].name);
        if (w < 0 || (size_t)w >= cap - n) break;
        n += (size_t)w;
    }
}

/* The allowed values of d (its choices but the empty one), space-separated; "" if none. */
static void values_of(const OptDef *d, char *out, size_t cap) {
    size_t n = 0;
    out[0] = '\0';
    for (size_t i = 0; d->choices && d->choices[i]; i++) {
        if (!d->choices[i][0]) continue;
        int w = snprintf(out + n, cap - n, "%s%s", n ? " " : "", d->choices[i]);
        if (w < 0 || (size_t)w >= cap - n) break;
        n += (size_t)w;
    }
}

/* A value that names a file or directory: any string or list flag without allowed values. */
static int takes_path(const OptDef *d) {
    return (d->type == OPT_STRING || d->type == OPT_LIST) && !d->choices;
}

/* d's help for a completion menu: without its parenthesized asides, up to its first "; ", at
 * most 72 bytes (cut on a word boundary). */
static void short_help(const OptDef *d, char *out, size_t cap) {
    size_t n = 0, depth = 0;
    const size_t max = cap - 1 < 72 ? cap - 1 : 72;
    for (const char *p = d->help; *p && n < max; p++) {
        if (*p == '(') {
            if (!depth && n && out[n - 1] == ' ') n--; /* "x (aside) y": "x y" */
            depth++;
            continue;
        }
        if (*p == ')') {
            if (depth) depth--;
            continue;
        }
        if (depth) continue;
        if (*p == ';' && p[1] == ' ') break;
        out[n++] = *p;
    }
    if (n == max && d->help[0])
        while (n > 0 && out[n - 1] != ' ')
            n--;
    while (n > 0 && out[n - 1] == ' ')
        n--;
    out[n] = '\0';
}

/* ---------- bash ---------- */

/* "-e|--endpoints|--service-endpoints...": the spellings of every flag for which pick says 1,
 * as one case pattern; 0 when there is none. */
static int bash_pattern(FILE *f, int (*pick)(const OptDef *, const void *), const void *arg) {
    size_t n = 0, k = 0;
    const OptDef *t = opts_table(&n);
    for (size_t i = 0; i < n; i++) {
        if (!pick(&t[i], arg)) continue;
        fputs(k++ ? "|" : "        ", f);
        if (t[i].short_name) fprintf(f, "-%c|", t[i].short_name);
        fprintf(f, "--%s", t[i].name);
    }
    if (k) fputs(")\n", f);
    return k > 0;
}

static int same_choices(const OptDef *d, const void *choices) {
    return d->choices == choices;
}
static int is_path(const OptDef *d, const void *unused) {
    (void)unused;
    return takes_path(d);
}
static int is_bool(const OptDef *d, const void *unused) {
    (void)unused;
    return d->type == OPT_BOOL;
}
static int is_number(const OptDef *d, const void *unused) {
    (void)unused;
    return d->type == OPT_INT || d->type == OPT_DURATION;
}

/* The case arms that complete a flag's value, the flag being $flag. */
static void bash_value_cases(FILE *f) {
    size_t n = 0;
    const OptDef *t = opts_table(&n);
    char values[512];
    for (size_t i = 0; i < n; i++) {
        if (!t[i].choices) continue;
        int first = 1; /* one arm per list of values, for every flag sharing it */
        for (size_t j = 0; j < i && first; j++)
            first = t[j].choices != t[i].choices;
        if (!first) continue;
        values_of(&t[i], values, sizeof values);
        bash_pattern(f, same_choices, t[i].choices);
        fprintf(f, "            words=\"%s\" ;;\n", values);
    }
    if (bash_pattern(f, is_path, NULL))
        fputs("            compopt -o filenames 2>/dev/null\n"
              "            mapfile -t COMPREPLY < <(compgen -f -- \"$cur\")\n"
              "            return 0 ;;\n",
              f);
    if (bash_pattern(f, is_number, NULL)) fputs("            return 0 ;;\n", f);
    if (bash_pattern(f, is_bool, NULL))
        fputs("            if ((eq)); then words=\"true false\"; else flag=; fi ;;\n", f);
    fputs("        *) flag= ;;\n", f);
}

/* The case arms listing each command's flags (or arguments), the command being $cmd. */
static void bash_command_cases(FILE *f) {
    size_t nc = 0, n = 0;
    const CmdInfo *c = cmd_infos(&nc);
    const OptDef *t = opts_table(&n);
    char names[512];
    for (size_t k = 0; k < nc; k++) {
        fprintf(f, "        %s)\n            words=\"", c[k].name);
        for (size_t i = 0; i < n; i++) {
            if (!(t[i].commands & c[k].bit)) continue;
            if (t[i].short_name) fprintf(f, "-%c ", t[i].short_name);
            fprintf(f, "--%s ", t[i].name);
        }
        fputs("-h --help\"", f);
        if (!strcmp(c[k].name, "help")) {
            all_names(NULL, names, sizeof names);
            fprintf(f, "\n            ((COMP_CWORD == ci + 1)) && words=\"%s\"", names);
        } else if (!strcmp(c[k].name, "completion")) {
            fputs("\n            ((COMP_CWORD == ci + 1)) && words=\"" SHELLS "\"", f);
        }
        fputs(" ;;\n", f);
    }
}

static void write_bash(FILE *f) {
    char names[512];
    all_names(NULL, names, sizeof names);
    fprintf(f,
            "# bash completion for etcdbrctl %s, generated by `etcdbrctl completion bash`.\n"
            "# Load it with: source <(etcdbrctl completion bash)\n"
            "_etcdbrctl() {\n"
            "    local cur=${COMP_WORDS[COMP_CWORD]} prev= flag= cmd= ci=0 words= pre= eq=0 i\n"
            "    COMPREPLY=()\n"
            "    ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}\n"
            "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
            "        case ${COMP_WORDS[i]} in\n"
            "        --) [[ $cmd == run ]] && return 0 ;; # the rest is etcd's command line\n"
            "        -* | =) ;;\n"
            "        *) [[ -z $cmd ]] && cmd=${COMP_WORDS[i]} ci=$i ;;\n"
            "        esac\n"
            "    done\n"
            "    if [[ -z $cmd ]]; then\n"
            "        mapfile -t COMPREPLY < <(compgen -W \"%s " TOP_FLAGS "\" -- \"$cur\")\n"
            "        return 0\n"
            "    fi\n"
            "    # a flag's value: --flag value, --flag=value (bash splits at '=' by default)\n"
            "    if [[ $cur == --*=* ]]; then\n"
            "        flag=${cur%%%%=*} pre=${cur%%%%=*}= cur=${cur#*=} eq=1\n"
            "    elif [[ $cur == = ]]; then\n"
            "        flag=$prev cur= eq=1\n"
            "    elif [[ $prev == = ]] && ((COMP_CWORD > 1)); then\n"
            "        flag=${COMP_WORDS[COMP_CWORD - 2]} eq=1\n"
            "    elif [[ $prev == -* ]]; then\n"
            "        flag=$prev\n"
            "    fi\n"
            "    if [[ -n $flag ]]; then\n"
            "        case $flag in\n",
            ETCDBR_VERSION, names);
    bash_value_cases(f);
    fputs("        esac\n"
          "    fi\n"
          "    if [[ -z $flag ]]; then\n"
          "        case $cmd in\n",
          f);
    bash_command_cases(f);
    fputs("        esac\n"
          "    fi\n"
          "    mapfile -t COMPREPLY < <(compgen -P \"$pre\" -W \"$words\" -- \"$cur\")\n"
          "}\n"
          "complete -F _etcdbrctl etcdbrctl\n",
          f);
}

/* ---------- zsh ---------- */

/* text for a single-quoted zsh word inside an _arguments spec's [description]: ' closes and
 * reopens the quotes, and [ ] : \ get a backslash */
static void zsh_desc(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '\'')
            fputs("'\\''", f);
        else if (strchr("[]:\\", *s))
            fprintf(f, "\\%c", *s);
        else
            fputc(*s, f);
    }
}

/* One _arguments spec for d, e.g.
 *   '(-o --output)'{-o+,--output=}'[report format]:format:(text json)' */
static void zsh_flag_spec(FILE *f, const OptDef *d) {
    char desc[128], values[512];
    short_help(d, desc, sizeof desc);
    const char *eq = d->type == OPT_BOOL ? "" : "=";
    fputs("        ", f);
    if (d->short_name)
        fprintf(f, "'(-%c --%s)'{-%c%s,--%s%s}'[", d->short_name, d->name, d->short_name,
                *eq ? "+" : "", d->name, eq);
    else
        fprintf(f, "'--%s%s[", d->name, eq);
    zsh_desc(f, desc);
    fputc(']', f);
    if (d->type != OPT_BOOL) {
        values_of(d, values, sizeof values);
        fprintf(f, ":%s:", opts_value_name(d));
        if (values[0])
            fprintf(f, "(%s)", values);
        else if (takes_path(d))
            fputs("_files", f);
        else
            fputs(" ", f); /* a number or a duration: nothing to offer */
    }
    fputs("' \\\n", f);
}

static void zsh_command_functions(FILE *f) {
    size_t nc = 0, n = 0;
    const CmdInfo *c = cmd_infos(&nc);
    const OptDef *t = opts_table(&n);
    for (size_t k = 0; k < nc; k++) {
        if (!c[k].bit) continue;
        fprintf(f, "_etcdbrctl_%s() {\n    _arguments -s -S \\\n", c[k].name);
        for (size_t i = 0; i < n; i++)
            if (t[i].commands & c[k].bit) zsh_flag_spec(f, &t[i]);
        if (!strcmp(c[k].name, "run")) fputs("        '*::etcd command line:_normal' \\\n", f);
        fprintf(f, "        '(- *)'{-h,--help}'[help for %s]'\n}\n\n", c[k].name);
    }
}

static void write_zsh(FILE *f) {
    size_t nc = 0;
    const CmdInfo *c = cmd_infos(&nc);
    fprintf(f,
            "#compdef etcdbrctl\n"
            "# zsh completion for etcdbrctl %s, generated by `etcdbrctl completion zsh`.\n"
            "# Save it as _etcdbrctl in a directory of $fpath, or after compinit:\n"
            "# source <(etcdbrctl completion zsh)\n\n",
            ETCDBR_VERSION);
    zsh_command_functions(f);
    fputs("_etcdbrctl_commands() {\n    local -a commands\n    commands=(\n", f);
    for (size_t k = 0; k < nc; k++) {
        fprintf(f, "        '%s:", c[k].name);
        zsh_desc(f, c[k].summary);
        fputs("'\n", f);
    }
    fputs("    )\n    _describe -t commands 'etcdbrctl command' commands\n}\n\n", f);
    fputs("_etcdbrctl() {\n"
          "    if ((CURRENT == 2)); then\n"
          "        if [[ $PREFIX == -* ]]; then\n"
          "            compadd -- " TOP_FLAGS "\n"
          "        else\n"
          "            _etcdbrctl_commands\n"
          "        fi\n"
          "        return\n"
          "    fi\n"
          "    local cmd=${words[2]}\n"
          "    shift words\n"
          "    ((CURRENT--))\n"
          "    case $cmd in\n"
          "    help) ((CURRENT == 2)) && _etcdbrctl_commands ;;\n"
          "    completion) ((CURRENT == 2)) && compadd -- " SHELLS " ;;\n"
          "    version) compadd -- -h --help ;;\n",
          f);
    for (size_t k = 0; k < nc; k++)
        if (c[k].bit) fprintf(f, "    %s) _etcdbrctl_%s ;;\n", c[k].name, c[k].name);
    fputs("    esac\n"
          "}\n\n"
          "if [[ ${funcstack[1]} == _etcdbrctl ]]; then\n"
          "    _etcdbrctl \"$@\" # autoloaded from $fpath\n"
          "elif (($+functions[compdef])); then\n"
          "    compdef _etcdbrctl etcdbrctl\n"
          "else\n"
          "    print -u2 'etcdbrctl completion: run compinit before loading this script'\n"
          "fi\n",
          f);
}

/* ---------- fish ---------- */

/* text inside single quotes in fish: \ and ' get a backslash */
static void fish_quoted(FILE *f, const char *s) {
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\\' || *s == '\'') fputc('\\', f);
        fputc(*s, f);
    }
    fputc('\'', f);
}

static void fish_flag(FILE *f, const OptDef *d) {
    char cmds[256], desc[128], values[512];
    names_of(d->commands, cmds, sizeof cmds);
    if (!cmds[0]) return;
    short_help(d, desc, sizeof desc);
    values_of(d, values, sizeof values);
    fprintf(f, "complete -c etcdbrctl -n '__fish_seen_subcommand_from %s'", cmds);
    if (d->short_name) fprintf(f, " -s %c", d->short_name);
    fprintf(f, " -l %s", d->name);
    if (values[0])
        fprintf(f, " -x -a '%s'", values);
    else if (takes_path(d))
        fputs(" -r -F", f);
    else if (d->type != OPT_BOOL)
        fputs(" -x", f);
    fputs(" -d ", f);
    fish_quoted(f, desc);
    fputc('\n', f);
}

static void write_fish(FILE *f) {
    size_t nc = 0, n = 0;
    const CmdInfo *c = cmd_infos(&nc);
    const OptDef *t = opts_table(&n);
    char names[512], others[512];
    all_names(NULL, names, sizeof names);
    all_names("help", others, sizeof others);
    fprintf(f,
            "# fish completion for etcdbrctl %s, generated by `etcdbrctl completion fish`.\n"
            "# Load it with: etcdbrctl completion fish | source\n"
            "complete -c etcdbrctl -f\n"
            "complete -c etcdbrctl -n __fish_use_subcommand -s h -l help -d 'help'\n"
            "complete -c etcdbrctl -n __fish_use_subcommand -s v -l version "
            "-d 'print the version'\n",
            ETCDBR_VERSION);
    for (size_t k = 0; k < nc; k++) {
        fprintf(f, "complete -c etcdbrctl -n __fish_use_subcommand -a %s -d ", c[k].name);
        fish_quoted(f, c[k].summary);
        fputc('\n', f);
    }
    fprintf(f,
            "complete -c etcdbrctl -n '__fish_seen_subcommand_from help; and not "
            "__fish_seen_subcommand_from %s' -a '%s'\n",
            others, names);
    fputs("complete -c etcdbrctl -n '__fish_seen_subcommand_from completion; and not "
          "__fish_seen_subcommand_from " SHELLS "' -a '" SHELLS "'\n",
          f);
    for (size_t k = 0; k < nc; k++)
        fprintf(f,
                "complete -c etcdbrctl -n '__fish_seen_subcommand_from %s' -s h -l help "
                "-d 'help for %s'\n",
                c[k].name, c[k].name);
    for (size_t i = 0; i < n; i++)
        fish_flag(f, &t[i]);
}

int completion_write(FILE *f, const char *shell) {
    if (!strcmp(shell, "bash"))
        write_bash(f);
    else if (!strcmp(shell, "zsh"))
        write_zsh(f);
    else if (!strcmp(shell, "fish"))
        write_fish(f);
    else
        return err_set(ERR_INVALID,
                       "completion: unknown shell \"%s\": must be one of bash, zsh, "
                       "fish",
                       shell);
    if (fflush(f) || ferror(f))
        return err_set(ERR_IO, "completion: writing the %s script: %s", shell, strerror(errno));
    return 0;
}

int cmd_completion(int argc, char **argv) {
    if (argc != 1) {
        fprintf(stderr, "Error: completion takes one shell: bash, zsh or fish\n"
                        "Run 'etcdbrctl completion --help' for usage.\n");
        return EXIT_USAGE;
    }
    int rc = completion_write(stdout, argv[0]);
    if (rc) fprintf(stderr, "Error: %s\n", err_msg());
    if (rc == ERR_INVALID) fputs("Run 'etcdbrctl completion --help' for usage.\n", stderr);
    return rc == ERR_INVALID ? EXIT_USAGE : rc ? EXIT_FAIL : EXIT_OK;
}
