#!/usr/bin/env bash
# `etcdbrctl completion bash`, loaded with `source <(etcdbrctl completion bash)` and driven as
# bash drives it (COMP_WORDS/COMP_CWORD, then the function `complete -p etcdbrctl` names):
# commands, each command's flags, the values of flags with a fixed set (--storage-provider,
# --compression-policy, -o; also in the --flag=value form bash splits at '='), file names for a
# path flag, `help <command>`, `completion <shell>`, nothing after `run --`.
source "$(dirname "$0")/lib.sh"
make_workdir
B=$ETCDBR_BIN

# shellcheck disable=SC1090
source <("$B" completion bash) || fail "the bash script does not load"
spec=$(complete -p etcdbrctl) || fail "no completion registered for etcdbrctl"
fn=$(sed -n 's/.* -F \([^ ]*\) .*/\1/p' <<<"$spec")
[ -n "$fn" ] || fail "complete -p etcdbrctl: $spec"

# comp WORD...: the candidates for the last word (one line, sorted)
comp() {
    COMP_WORDS=("$@")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMP_LINE="$*"
    COMP_POINT=${#COMP_LINE}
    COMPREPLY=()
    "$fn" etcdbrctl "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
    printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' ' | sed 's/ $//'
}
expect() { # expect "CANDIDATES" WORD...
    local want=$1 got
    shift
    got=$(comp "$@")
    [ "$got" = "$want" ] || fail "etcdbrctl ${*:2}<TAB>: got '$got', want '$want'"
}
expect_has() { # expect_has CANDIDATE WORD...: CANDIDATE among the candidates
    local want=$1 got
    shift
    got=$(comp "$@")
    [[ " $got " == *" $want "* ]] || fail "etcdbrctl ${*:2}<TAB>: '$want' not in '$got'"
}

expect "snapshot" etcdbrctl sna
expect "restore run" etcdbrctl r
expect_has "--storage-provider" etcdbrctl snapshot --stor
expect "--storage-provider --store-container --store-endpoint-override --store-prefix" etcdbrctl snapshot --stor
expect_has "--etcd-connection-timeout-leader-election" etcdbrctl server --etcd-connection-timeout-
# a flag of another command is not offered
expect "" etcdbrctl list --data-d
expect_has "--data-dir" etcdbrctl restore --data-d
expect_has "-o" etcdbrctl list -
# allowed values
expect "ABS ECS GCS Local OCS OSS S3 Swift" etcdbrctl snapshot --storage-provider ""
expect "S3 Swift" etcdbrctl restore --storage-provider S
expect "OCS OSS" etcdbrctl copy --source-storage-provider = O
expect "--storage-provider=ABS" etcdbrctl snapshot --storage-provider=A
expect "gzip lzw zlib zstd" etcdbrctl snapshot --compression-policy ""
expect "json simple table text" etcdbrctl list -o ""
expect "json" etcdbrctl verify --output = j
expect "false true" etcdbrctl snapshot --compress-snapshots = ""
# a bool flag takes no value: the next word is a flag again
expect_has "--compression-policy" etcdbrctl snapshot --compress-snapshots --compression-p
# a path flag: file names
mkdir "$WORK/datadir-x"
expect "$WORK/datadir-x" etcdbrctl restore --data-dir "$WORK/datadir-"
# commands and shells as arguments
expect "verify version" etcdbrctl help ver
expect "bash" etcdbrctl completion ba
expect "" etcdbrctl run --data-dir x -- etcd --na
echo "bash completion: ok"
