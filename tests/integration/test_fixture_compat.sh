#!/usr/bin/env bash
# Restores every store under tests/fixtures (written by the Go etcdbrctl: plain, gzip, zlib,
# Go LZW, legacy v1 layout; ebr043-*: Go tool v0.43.0 with ~1 MiB values; etcdbr-gzip-parallel: ours,
# parallel gzip members) and checks the keyspace and revision against expected/.
source "$(dirname "$0")/lib.sh"
make_workdir
for fx in "$ETCDBR_SOURCE_DIR"/tests/fixtures/*/; do
    fx=${fx%/}
    name=$(basename "$fx")
    echo "== $name"
    cp -r "$fx/store" "$WORK/$name-store"
    sha_before=$(cd "$WORK/$name-store" && find . -type f -exec sha256sum {} + | sort)
    restore_store "$WORK/$name-store" "$WORK/$name.etcd" || fail "$name: restore failed"
    sha_after=$(cd "$WORK/$name-store" && find . -type f -exec sha256sum {} + | sort)
    [ "$sha_before" = "$sha_after" ] || fail "$name: restore changed the store"
    start_etcd restored "$WORK/$name.etcd"
    dump_keys "$ETCD_EP" >"$WORK/$name.keys.jsonl"
    rev=$(current_revision "$ETCD_EP")
    stop_pid "$ETCD_PID"
    [ "$rev" = "$(cat "$fx/expected/revision")" ] || fail "$name: revision $rev, expected $(cat "$fx/expected/revision")"
    cmp "$WORK/$name.keys.jsonl" "$fx/expected/keys.jsonl" || {
        diff <(head -c 3000 "$WORK/$name.keys.jsonl") <(head -c 3000 "$fx/expected/keys.jsonl") | head -20
        fail "$name: keyspace differs from expected/keys.jsonl"
    }
    echo "$name: revision $rev and $(wc -l <"$fx/expected/keys.jsonl") keys match"
done
