#!/usr/bin/env bash
# The keys given where a key FILE is expected (--encryption-key-file or ETCDBR_ENCRYPTION_KEY_FILE
# holding "<id> <key>" text, as an operator mixing it up with ETCDBR_ENCRYPTION_KEYS would): every
# command that takes the flag refuses to run, and neither its effective-options line nor its error
# quotes the key (docs/encryption.md: keys never go into logs or error messages). A key file that
# exists is still named in the log. Needs no etcd: the commands fail before they would reach it;
# the store is a real (empty) Local store. Last, `copy` given a key file warns that it encrypts
# nothing (it copies stored bytes).
source "$(dirname "$0")/lib.sh"
make_workdir
KEY=$(head -c 32 /dev/urandom | base64 -w0)
KEY_NOPAD=${KEY%=}
KEY2=$(head -c 32 /dev/urandom | base64 -w0)
(
    umask 077
    printf 'k1 %s\n' "$KEY" >"$WORK/keys"
)
mkdir -p "$WORK/store/v2"
STORE=(--storage-provider=Local --store-container="$WORK/store")

# no_key_in LOG: none of the keys' base64 (with or without padding) is in LOG
no_key_in() {
    local k
    for k in "$KEY" "$KEY_NOPAD" "$KEY2" "${KEY2%=}"; do
        if grep -F -- "$k" "$1" >/dev/null; then
            fail "$1 quotes a key: $(sed "s#${k//\//\\/}#<KEY>#g" "$1" | grep -F '<KEY>' | head -3)"
        fi
    done
}

for value in "k1 $KEY" "$KEY" "k1 $KEY_NOPAD;k2 $KEY2"; do
    for cmd in list verify compact restore snapshot copy initialize server; do
        extra=()
        case $cmd in
        restore) extra=(--data-dir="$WORK/restored" --restoration-temp-snapshots-dir="$WORK/rtmp") ;;
        copy) extra=(--source-store-container="$WORK/store") ;;
        compact) extra=(--restoration-temp-snapshots-dir="$WORK/ctmp") ;;
        snapshot | initialize | server) extra=(--endpoints=http://127.0.0.1:1 --data-dir="$WORK/member") ;;
        esac
        [ "$cmd" = snapshot ] && extra=(--endpoints=http://127.0.0.1:1)
        log=$WORK/$cmd.flag.log
        rc=0
        "$ETCDBR_BIN" "$cmd" "${STORE[@]}" "${extra[@]}" --encryption-key-file="$value" >"$log" 2>&1 || rc=$?
        [ "$rc" != 0 ] || fail "$cmd --encryption-key-file=<key text> exited 0"
        grep -F 'encryption keys: key file' "$log" >/dev/null || fail "$cmd: no key file error in $log: $(tail -3 "$log")"
        no_key_in "$log"
        log=$WORK/$cmd.env.log
        rc=0
        ETCDBR_ENCRYPTION_KEY_FILE="$value" "$ETCDBR_BIN" "$cmd" "${STORE[@]}" "${extra[@]}" >"$log" 2>&1 || rc=$?
        [ "$rc" != 0 ] || fail "$cmd with ETCDBR_ENCRYPTION_KEY_FILE=<key text> exited 0"
        grep -F 'ETCDBR_ENCRYPTION_KEYS' "$log" >/dev/null || fail "$cmd: the error does not point to ETCDBR_ENCRYPTION_KEYS: $(tail -3 "$log")"
        no_key_in "$log"
    done
done
echo "PASS: key text given as the key file: every command refuses it and quotes no key"

# the right way still works and names the file: compact of an empty store fails (no full
# snapshot), but only after the keys were loaded
rc=0
"$ETCDBR_BIN" list "${STORE[@]}" --encryption-key-file="$WORK/keys" >"$WORK/list.log" 2>&1 || rc=$?
[ "$rc" = 0 ] || fail "list with a key file exited $rc: $(tail -3 "$WORK/list.log")"
grep -F "encryption: 1 key(s) from $WORK/keys" "$WORK/list.log" >/dev/null || fail "the key file is not named: $(cat "$WORK/list.log")"
grep -F "encryption-key-file=$WORK/keys" "$WORK/list.log" >/dev/null || fail "the effective options do not show the key file's path"
no_key_in "$WORK/list.log"
echo "PASS: a key file given as a path is named in the log"

# copy given keys: it copies stored bytes and encrypts nothing, so it must say so rather than
# leave "new snapshots are encrypted" as the last word about the keys
mkdir -p "$WORK/src/v2"
rc=0
"$ETCDBR_BIN" copy --source-storage-provider=Local --source-store-container="$WORK/src" \
    "${STORE[@]}" --encryption-key-file="$WORK/keys" >"$WORK/copy.log" 2>&1 || rc=$?
[ "$rc" = 0 ] || fail "copy with a key file exited $rc: $(tail -3 "$WORK/copy.log")"
grep 'level=warning' "$WORK/copy.log" | grep -F 'copy neither encrypts nor decrypts' >/dev/null ||
    fail "copy given keys does not warn that it encrypts nothing: $(grep -v 'msg="etcdbrctl' "$WORK/copy.log")"
echo "PASS: copy given keys warns that it copies unencrypted objects unencrypted"

# a source without backups (a mistyped container or prefix) copies nothing: exit 0, but a warning
grep 'level=warning' "$WORK/copy.log" | grep -F "copy: no backup selected in the source" >/dev/null ||
    fail "copy from a source without backups does not warn: $(grep -v 'msg="etcdbrctl' "$WORK/copy.log")"
echo "PASS: copy from a source without backups warns"
