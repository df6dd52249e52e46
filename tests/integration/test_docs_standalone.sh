#!/usr/bin/env bash
# The repository stands alone (issue 19 item 5): no comment or doc points at a document outside it
# (the design and study notes the project started from), every "go-tool.md §N" names a section
# that docs/go-tool.md has, and every docs/*.md page that a doc or comment names exists.
source "$(dirname "$0")/lib.sh"
cd "$ETCDBR_SOURCE_DIR"
command -v git >/dev/null && git rev-parse --git-dir >/dev/null 2>&1 || skip_test "not a git checkout"
# 1. documents that are not in the repository
# the names are spelled in pieces so that this file does not match itself
pat="seed""-spec|TEST""ENV|\\.\\./sha""red|(^|[^/a-z])(DES""IGN|STY""LE)\\.md"
outside=$(git grep -n -E "$pat" || true)
[ -z "$outside" ] || fail "these point at documents outside the repository:
$outside"

# 2. every cited section of docs/go-tool.md exists ("§3.6", "§15.10" = item 10 of §15, "§15 item 11")
sections=$(sed -n 's/^##* \([0-9][0-9.]*\)\. .*/\1/p; s/^### \([0-9][0-9.]*\) .*/\1/p' docs/go-tool.md | sort -u)
items=$(awk '/^## 15\./{on=1; next} /^## /{on=0} on && /^[0-9]+\. /{sub(/\..*/, ""); print}' docs/go-tool.md)
[ -n "$sections" ] && [ -n "$items" ] || fail "could not read the sections of docs/go-tool.md"
missing=()
while read -r ref; do
    n=${ref#§}
    if [[ $n == 15.* ]]; then
        grep -qx "${n#15.}" <<<"$items" || missing+=("$ref")
    else
        grep -qx "$n" <<<"$sections" || missing+=("$ref")
    fi
done < <(git grep -h -o -E 'go-tool\.md §[0-9]+(\.[0-9]+)?' | sed 's/.* //' | sort -u)
[ "${#missing[@]}" = 0 ] || fail "cited sections that docs/go-tool.md lacks: ${missing[*]}"
grep -q '^## Appendix B' docs/go-tool.md || fail "docs/go-tool.md has no Appendix B"

# 3. every docs/<page>.md named anywhere exists
absent=()
while read -r page; do
    [ -f "$page" ] || absent+=("$page")
done < <(git grep -h -o -E 'docs/[a-z0-9-]+\.md' | sort -u)
[ "${#absent[@]}" = 0 ] || fail "named but absent: ${absent[*]}"
echo "no outside references; $(git grep -h -o -E 'go-tool\.md §[0-9.]+' | wc -l) section citations resolve; docs pages named all exist"
