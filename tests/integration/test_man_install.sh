#!/usr/bin/env bash
# The man page and the install:
#  1. the build's etcdbrctl.1 is what the built binary's `__man` writes (CMake made it from the
#     binary, not from an older one);
#  2. groff renders it with every warning on (-ww) and none given, and `man -l` shows it: the
#     name, one subsection per command, a flag of each with its description;
#  3. `cmake --install <build> --prefix <tmp>` installs bin/etcdbrctl (which runs),
#     share/man/man1/etcdbrctl.1 (which `man` finds by MANPATH) and the three completion scripts.
source "$(dirname "$0")/lib.sh"
command -v groff >/dev/null || skip_test "groff is not installed (groff-base: scripts/install-deps.sh)"
command -v man >/dev/null || skip_test "man is not installed (man-db: scripts/install-deps.sh)"
make_workdir
BUILD=${ETCDBR_BUILD_DIR:-$(dirname "$ETCDBR_BIN")}
PAGE=$BUILD/etcdbrctl.1
[ -s "$PAGE" ] || fail "$PAGE is missing: the build makes it (target etcdbr_docs)"

# 1.
"$ETCDBR_BIN" __man >"$WORK/now.1" || fail "__man exited $?"
cmp -s "$WORK/now.1" "$PAGE" || fail "$PAGE differs from the binary's __man: rebuild"

# 2.
LC_ALL=C.UTF-8 groff -man -Tutf8 -ww -z "$PAGE" 2>"$WORK/warn" || fail "groff exited $?"
[ ! -s "$WORK/warn" ] || { head "$WORK/warn"; fail "groff warns about $PAGE"; }
LC_ALL=C.UTF-8 MANWIDTH=100 man --warnings -l "$PAGE" >"$WORK/page" 2>"$WORK/warn" || fail "man -l exited $?"
[ ! -s "$WORK/warn" ] || { head "$WORK/warn"; fail "man -l warns"; }
grep -q '^ETCDBRCTL(1)' "$WORK/page" || fail "no header in the rendered page"
grep -q 'etcdbrctl - etcd backup and restore' "$WORK/page" || fail "no NAME line"
for c in snapshot restore server initialize compact copy verify list run help completion version; do
    grep -q "^   etcdbrctl $c" "$WORK/page" || fail "no subsection for $c"
done
# a flag under its command, with its description and allowed values; hyphens stay ASCII
sed -n '/^   etcdbrctl list/,/^   etcdbrctl run/p' "$WORK/page" >"$WORK/list"
grep -q -- '-o, --output string' "$WORK/list" || fail "list's -o, --output missing"
grep -q 'one of text, json' "$WORK/list" || fail "list's --output values missing"
grep -q -- '--data-dir' "$WORK/list" && fail "list shows restore's --data-dir"
grep -q -- '--storage-provider string' "$WORK/page" || fail "--storage-provider missing"

# 3.
cmake --install "$BUILD" --prefix "$WORK/prefix" >"$WORK/install.log" || { cat "$WORK/install.log"; fail "cmake --install failed"; }
for f in bin/etcdbrctl share/man/man1/etcdbrctl.1 share/bash-completion/completions/etcdbrctl \
    share/zsh/vendor-completions/_etcdbrctl share/fish/vendor_completions.d/etcdbrctl.fish; do
    [ -s "$WORK/prefix/$f" ] || fail "cmake --install did not install $f"
done
[ -x "$WORK/prefix/bin/etcdbrctl" ] || fail "the installed etcdbrctl is not executable"
"$WORK/prefix/bin/etcdbrctl" --version | head -1 | grep -q '^etcdbrctl version ' || fail "the installed etcdbrctl does not run"
cmp -s "$WORK/prefix/share/man/man1/etcdbrctl.1" "$PAGE" || fail "the installed page differs"
MANPATH=$WORK/prefix/share/man man -w etcdbrctl | grep -qx "$WORK/prefix/share/man/man1/etcdbrctl.1" ||
    fail "man does not find the installed page by MANPATH"
"$ETCDBR_BIN" completion bash | cmp -s - "$WORK/prefix/share/bash-completion/completions/etcdbrctl" ||
    fail "the installed bash completion differs from the binary's"
echo "man page and install: ok"
