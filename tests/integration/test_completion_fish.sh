#!/usr/bin/env bash
# `etcdbrctl completion fish`: the script parses (fish -n), loads (`| source`), and fish's own
# completion engine (complete -C, what <TAB> shows) offers commands, flags and flag values.
source "$(dirname "$0")/lib.sh"
command -v fish >/dev/null || skip_test "fish is not installed (scripts/install-deps.sh installs it)"
make_workdir
"$ETCDBR_BIN" completion fish >"$WORK/etcdbrctl.fish"
fish -n "$WORK/etcdbrctl.fish" || fail "fish -n: the script does not parse"
# complete -C LINE: the candidates (their first, tab-separated field), sorted, on one line
comp() {
    HOME=$WORK XDG_CONFIG_HOME=$WORK/config XDG_DATA_HOME=$WORK/data \
        fish --no-config -c "source '$WORK/etcdbrctl.fish'; complete -C '$1'" 2>"$WORK/err" |
        cut -f1 | sort | tr '\n' ' ' | sed 's/ $//'
    [ ! -s "$WORK/err" ] || fail "fish: $(cat "$WORK/err")"
}
expect() {
    local got
    got=$(comp "$2")
    [ "$got" = "$1" ] || fail "fish: '$2<TAB>' offers '$got', want '$1'"
}
expect "snapshot" "etcdbrctl sna"
expect "--storage-provider --store-container --store-endpoint-override --store-prefix" "etcdbrctl snapshot --stor"
expect "ABS ECS GCS Local OCS OSS S3 Swift" "etcdbrctl snapshot --storage-provider "
expect "gzip lzw zlib zstd" "etcdbrctl server --compression-policy "
expect "json simple table text" "etcdbrctl list -o "
expect "bash fish zsh" "etcdbrctl completion "
expect "verify version" "etcdbrctl help ver"
expect "" "etcdbrctl list --data-d"
echo "fish completion: ok"
