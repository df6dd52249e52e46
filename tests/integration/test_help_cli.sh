#!/usr/bin/env bash
# etcdbrctl help and --version, through the binary:
#  1. `help <command>` prints exactly what `<command> --help` prints (exit 0), for every command
#     the top-level help lists; `help` and `help help` the top-level help, as `--help` does;
#  2. `help <unknown>` fails as `<unknown>` does: exit 2, the error naming it on stderr, nothing
#     on stdout; `help a b` is a usage error too;
#  3. no line of any command's --help, nor of the top level, is wider than 100 columns;
#  4. --version, -v and `version` print the same report: the first line as before
#     ("etcdbrctl version X.Y.Z", what the Dockerfile's check and scripts read), the git commit
#     of this checkout (when it is one), the build date, the compiler, each linked library;
#  5. cmake/build_info.cmake: SOURCE_DATE_EPOCH sets the date; outside a git checkout the
#     commit is "unknown"; an unchanged commit leaves the file untouched.
source "$(dirname "$0")/lib.sh"
make_workdir
B=$ETCDBR_BIN

# the commands, as the top-level help lists them
"$B" --help >"$WORK/top" || fail "--help exited $?"
mapfile -t cmds < <(sed -n '/^Commands:/,/^$/p' "$WORK/top" | sed -n 's/^  \([a-z]\+\) .*/\1/p')
[ "${#cmds[@]}" -ge 12 ] || fail "the top-level help lists ${#cmds[@]} commands: ${cmds[*]}"
for c in snapshot restore server initialize compact copy verify list run help completion version; do
    printf '%s\n' "${cmds[@]}" | grep -qx "$c" || fail "the top-level help does not list $c"
done

# 1. help <command> = <command> --help
for c in "${cmds[@]}"; do
    "$B" "$c" --help >"$WORK/flag.$c" || fail "$c --help exited $?"
    [ "$c" = help ] && continue # `help help` is the top level (below)
    "$B" help "$c" >"$WORK/help.$c" || fail "help $c exited $?"
    cmp -s "$WORK/flag.$c" "$WORK/help.$c" || { diff "$WORK/flag.$c" "$WORK/help.$c" | head; fail "help $c differs from $c --help"; }
    grep -q "^  etcdbrctl $c" "$WORK/help.$c" || fail "help $c: no usage line for $c"
    cmp -s "$WORK/help.$c" "$WORK/top" && fail "help $c printed the top-level help"
done
grep -q -- '--storage-provider string' "$WORK/help.snapshot" || fail "help snapshot lacks --storage-provider"
for args in "help" "help help" "-h" "help --help"; do
    # shellcheck disable=SC2086
    "$B" $args >"$WORK/out" || fail "$args exited $?"
    cmp -s "$WORK/out" "$WORK/top" || fail "'$args' is not the top-level help"
done

# 2. unknown commands: as `etcdbrctl nosuch`
rc1=0 rc2=0 rc3=0
"$B" nosuch >"$WORK/o1" 2>"$WORK/e1" || rc1=$?
"$B" help nosuch >"$WORK/o2" 2>"$WORK/e2" || rc2=$?
"$B" help snapshot restore >/dev/null 2>"$WORK/e3" || rc3=$?
[ "$rc1" = 2 ] || fail "nosuch exited $rc1, not 2"
[ "$rc2" = "$rc1" ] || fail "help nosuch exited $rc2, nosuch $rc1"
[ ! -s "$WORK/o2" ] || fail "help nosuch wrote to stdout"
grep -q 'Error: unknown command "nosuch" for "etcdbrctl"' "$WORK/e2" || fail "help nosuch: $(head -1 "$WORK/e2")"
cmp -s "$WORK/e1" "$WORK/e2" || fail "help nosuch and nosuch say different things"
[ "$rc3" = 2 ] || fail "help snapshot restore exited $rc3, not 2"

# 3. 100 columns
for c in "${cmds[@]}" top; do
    f=$WORK/flag.$c
    [ "$c" = top ] && f=$WORK/top
    awk -v c="$c" 'length($0) > 100 { printf "%s --help line %d: %d columns\n", c, NR, length($0); bad = 1 }
                   END { exit bad }' "$f" || fail "$c --help has lines over 100 columns"
done

# 4. the version report
"$B" --version >"$WORK/v" || fail "--version exited $?"
"$B" -v | cmp -s - "$WORK/v" || fail "-v differs from --version"
"$B" version | cmp -s - "$WORK/v" || fail "version differs from --version"
cat "$WORK/v"
want=$(sed -n 's/^project(etcdbr VERSION \([0-9.]*\).*/\1/p' "$ETCDBR_SOURCE_DIR/CMakeLists.txt")
[ "$(sed -n 1p "$WORK/v")" = "etcdbrctl version $want" ] || fail "first line: $(sed -n 1p "$WORK/v")"
field() { sed -n "s/^$1: //p" "$WORK/v"; }
commit=$(field commit)
if git -C "$ETCDBR_SOURCE_DIR" rev-parse --short=12 HEAD >/dev/null 2>&1 &&
    [ "$(cd "$(git -C "$ETCDBR_SOURCE_DIR" rev-parse --show-toplevel)" && pwd -P)" = "$(cd "$ETCDBR_SOURCE_DIR" && pwd -P)" ]; then
    # the binary may be older than HEAD (built, then committed): it names a commit of this
    # repository, in full form 12 hex digits, and -dirty only as the last part
    [[ $commit =~ ^[0-9a-f]{12}(-dirty)?$ ]] || fail "commit: '$commit'"
    git -C "$ETCDBR_SOURCE_DIR" cat-file -e "${commit%-dirty}^{commit}" || fail "commit $commit is not in this repository"
else
    [ "$commit" = unknown ] || fail "outside a git checkout the commit is '$commit'"
fi
[[ $(field 'build date') =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$ ]] || fail "build date: '$(field 'build date')'"
[[ $(field compiler) =~ ^(gcc|clang)\ [0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "compiler: '$(field compiler)'"
for lib in libcurl OpenSSL zlib libzstd jansson libmicrohttpd protobuf-c libyaml libdeflate; do
    [[ $(field "$lib") =~ ^[0-9]+\.[0-9]+ ]] || fail "$lib: '$(field "$lib")'"
done
# the libraries the binary runs with: as their packages say (pkg-config, the same install)
for pair in libcurl:libcurl zlib:zlib libzstd:libzstd jansson:jansson libmicrohttpd:libmicrohttpd \
    protobuf-c:libprotobuf-c libyaml:yaml-0.1 OpenSSL:openssl libdeflate:libdeflate; do
    pc=$(pkg-config --modversion "${pair#*:}" 2>/dev/null) || continue
    v=$(field "${pair%%:*}")
    [ "${v%% *}" = "$pc" ] || fail "${pair%%:*} says '$v', pkg-config '$pc'"
done

# 5. the build-info script
gen() { # gen OUT SRC [SOURCE_DATE_EPOCH]: runs cmake/build_info.cmake
    env ${3:+SOURCE_DATE_EPOCH=$3} cmake -DSRC="$2" -DOUT="$1" -DVERSION=1.2.3 \
        -P "$ETCDBR_SOURCE_DIR/cmake/build_info.cmake"
}
mkdir "$WORK/notgit"
gen "$WORK/bi1.c" "$WORK/notgit" 86400
grep -q '{"1.2.3", "unknown", "1970-01-02T00:00:00Z"}' "$WORK/bi1.c" || fail "no git, SOURCE_DATE_EPOCH=86400: $(cat "$WORK/bi1.c")"
if git -C "$ETCDBR_SOURCE_DIR" rev-parse HEAD >/dev/null 2>&1; then
    head=$(git -C "$ETCDBR_SOURCE_DIR" rev-parse --short=12 HEAD)
    gen "$WORK/bi2.c" "$ETCDBR_SOURCE_DIR" 1700000000
    grep -Eq "\{\"1.2.3\", \"$head(-dirty)?\", \"2023-11-14T22:13:20Z\"\}" "$WORK/bi2.c" || fail "git: $(cat "$WORK/bi2.c")"
    touch -d '2001-01-01' "$WORK/bi2.c"
    gen "$WORK/bi2.c" "$ETCDBR_SOURCE_DIR" 1700000000
    [ "$(stat -c %Y "$WORK/bi2.c")" = "$(date -d 2001-01-01 +%s)" ] || fail "an unchanged commit rewrote build_info.c"
    gen "$WORK/bi2.c" "$ETCDBR_SOURCE_DIR" 1700000001
    grep -q '2023-11-14T22:13:21Z' "$WORK/bi2.c" || fail "a new SOURCE_DATE_EPOCH did not rewrite build_info.c"
fi
echo "help and version: ok"
