#!/usr/bin/env bash
# Client-side encryption (docs/encryption.md) end to end, keys from a file (never argv):
# 1. on a real S3 server (@20minutes/s3rver): store_round_trip (real etcd, one full snapshot and
#    deltas, restore equal to the source in keys, values and revisions) for each compression
#    (none, gzip, zlib, lzw, zstd); every stored object is named ".enc<compression>" and starts
#    with the format's magic;
# 2. faults planted in a copy of the uncompressed set on the Local store (plain files to edit):
#    a wrong key, an unknown key id, no key, a flipped byte in the full snapshot and in a delta,
#    truncation at a chunk boundary and inside a chunk, reordered chunks, a dropped chunk, bytes
#    appended: each `restore` fails with the precise message and leaves no data dir;
# 3. key rotation on s3rver: the full snapshot and a delta under the old key, the snapshotter
#    restarted with the rotated key file (new key first) resumes with deltas under the new key;
#    the mixed set restores with the rotated file, and the old file alone names the missing key;
# 4. no log of any run holds a key's base64.
# ETCDBR_ENC_COMPRESSIONS="gzip" limits the compressions after "none" (which the faults need).
source "$(dirname "$0")/lib.sh"
make_workdir
start_s3rver backups
export AWS_APPLICATION_CREDENTIALS_JSON=$S3_CREDS_JSON
S3FLAGS=(--storage-provider=S3 --store-container="$S3_BUCKET" --store-endpoint-override="$S3_ENDPOINT")
BUCKET_DIR=$WORK/s3rver/$S3_BUCKET
MAGIC=etcdbrAE
CHUNK=65536
FRAME=$((CHUNK + 20)) # length word, ciphertext, tag
HDR=$((15 + 2 + 64))  # key ids here are 2 characters

# bytes_of FILE OFFSET COUNT: COUNT bytes of FILE from OFFSET (no pipe that SIGPIPE could fail)
bytes_of() { dd if="$1" iflag=skip_bytes,count_bytes skip="$2" count="$3" status=none; }

KEY1=$(head -c 32 /dev/urandom | base64 -w0)
KEY2=$(head -c 32 /dev/urandom | base64 -w0)
KEYBAD=$(head -c 32 /dev/urandom | base64 -w0)
keyfile() {
    local f=$WORK/$1
    shift
    (
        umask 077
        printf '%s\n' "$@" >"$f"
    )
    echo "$f"
}
K_OLD=$(keyfile keys-old "# the first key" "k1 $KEY1")
K_ROT=$(keyfile keys-rotated "# rotated: k2 encrypts new snapshots, k1 still decrypts" "k2 $KEY2" "k1 $KEY1")
K_WRONG=$(keyfile keys-wrong "k1 $KEYBAD")
K_OTHER=$(keyfile keys-other "k2 $KEY2")

# ---- 1. encrypted round trips on s3rver, one per compression ----
export ETCDBR_ENCRYPTION_KEY_FILE=$K_OLD
for comp in none ${ETCDBR_ENC_COMPRESSIONS:-gzip zlib lzw zstd}; do
    case $comp in
    none) RT_SNAPSHOT_FLAGS="--compress-snapshots=false" sfx=.enc ;;
    gzip) RT_SNAPSHOT_FLAGS="--compression-policy=gzip" sfx=.enc.gz ;;
    zlib) RT_SNAPSHOT_FLAGS="--compression-policy=zlib" sfx=.enc.zlib ;;
    lzw) RT_SNAPSHOT_FLAGS="--compression-policy=lzw" sfx=.enc.Z ;;
    zstd) RT_SNAPSHOT_FLAGS="--compression-policy=zstd" sfx=.enc.zst ;;
    esac
    store_round_trip "enc-$comp" "${S3FLAGS[@]}" --store-prefix="enc-$comp"
    log=$WORK/rt-enc-$comp/snap.log
    grep -F 'encryption: 1 key(s) from' "$log" >/dev/null || fail "$comp: no encryption line in $log"
    d=$BUCKET_DIR/enc-$comp/v2
    fulls=$(find "$d" -name "Full-*$sfx._S3rver_object" | wc -l)
    deltas=$(find "$d" -name "Incr-*$sfx._S3rver_object" | wc -l)
    others=$(find "$d" -name '*._S3rver_object' ! -name "*$sfx._S3rver_object" | wc -l)
    [ "$fulls" = 1 ] || fail "$comp: $fulls full snapshots named *$sfx in the bucket"
    [ "$deltas" = "$RT_DELTAS" ] || fail "$comp: $deltas deltas named *$sfx, $RT_DELTAS stored"
    [ "$others" = 0 ] || fail "$comp: objects not named *$sfx: $(find "$d" -name '*._S3rver_object' ! -name "*$sfx._S3rver_object")"
    for f in "$d"/*._S3rver_object; do
        [ "$(bytes_of "$f" 0 8)" = "$MAGIC" ] || fail "$comp: $f does not start with the format's magic"
        [ "$(bytes_of "$f" 15 2)" = k1 ] || fail "$comp: $f is not under key id k1"
    done
    echo "PASS: encrypted round trip with compression $comp on s3rver ($fulls full, $deltas deltas, *$sfx)"
done

# ---- 2. faults, on a Local copy of the uncompressed set ----
PRISTINE=$WORK/pristine
(cd "$BUCKET_DIR" && find enc-none -name '*._S3rver_object') | while read -r f; do
    mkdir -p "$PRISTINE/$(dirname "$f")"
    cp "$BUCKET_DIR/$f" "$PRISTINE/${f%._S3rver_object}"
done
FL=$WORK/faulty
reset_faulty() {
    rm -rf "$FL"
    cp -a "$PRISTINE" "$FL"
    FULL=$(ls "$FL"/enc-none/v2/Full-*)
    DELTA=$(ls "$FL"/enc-none/v2/Incr-* | head -1)
}

local_restore() { # LABEL KEYFILE ("" = none): restores the faulty copy; sets RC, DATA, LOG
    local label=$1 keys=$2
    DATA=$WORK/restore-$label.etcd
    LOG=$WORK/restore-$label.log
    RC=0
    env -u ETCDBR_ENCRYPTION_KEY_FILE ${keys:+ETCDBR_ENCRYPTION_KEY_FILE=$keys} \
        "$ETCDBR_BIN" restore --storage-provider=Local --store-container="$FL" \
        --store-prefix=enc-none --data-dir="$DATA" --name=restored \
        --initial-cluster=restored=http://127.0.0.1:2380 \
        --initial-advertise-peer-urls=http://127.0.0.1:2380 \
        --restoration-temp-snapshots-dir="$DATA.tmp" >"$LOG" 2>&1 || RC=$?
}

expect_refused() { # LABEL KEYFILE WANT: restore fails, says WANT, leaves no data dir
    local label=$1 keys=$2 want=$3
    local_restore "$label" "$keys"
    [ "$RC" != 0 ] || fail "$label: restore succeeded"
    grep -F -- "$want" "$LOG" >/dev/null || {
        cat "$LOG" >&2
        fail "$label: the error does not say: $want"
    }
    [ ! -e "$DATA" ] || fail "$label: restore left the data dir $DATA"
    [ -z "$(find "$WORK" -maxdepth 1 -name "restore-$label.etcd*" ! -name '*.tmp')" ] ||
        fail "$label: restore left $(find "$WORK" -maxdepth 1 -name "restore-$label.etcd*")"
    echo "PASS: $label refused (exit $RC): $(grep -m1 'level=error' "$LOG" | sed 's/.*msg=//' | cut -c1-240)"
}

flip_byte() { # FILE OFFSET
    local v
    v=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
    printf "$(printf '\\%03o' $((v ^ 0x5a)))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

chunk_at() { echo $((HDR + $1 * FRAME)); }

# the copy restores as it is (the set-up is sound)
reset_faulty
nchunks=$((($(stat -c %s "$FULL") - HDR) / FRAME))
[ "$nchunks" -ge 4 ] || fail "the uncompressed full snapshot has only $nchunks chunks"
local_restore pristine "$K_OLD"
[ "$RC" = 0 ] || {
    cat "$LOG" >&2
    fail "restore of the unaltered Local copy failed"
}
start_etcd pristine "$DATA"
dump_keys "$ETCD_EP" >"$WORK/pristine.jsonl"
stop_pid "$ETCD_PID"
cmp -s "$WORK/pristine.jsonl" "$WORK/rt-enc-none/src.jsonl" || fail "the Local copy restores other keys"
echo "PASS: the unaltered copy restores equal to the source ($nchunks chunks in the full snapshot)"

expect_refused wrong-key "$K_WRONG" 'wrong key or not ours: key id \"k1\"'
expect_refused unknown-key-id "$K_OTHER" 'encrypted with key id \"k1\", which is not among the keys given (k2)'
expect_refused no-key "" "is encrypted and no encryption keys were given"

reset_faulty
flip_byte "$FULL" $(($(chunk_at 2) + 1000))
expect_refused flipped-byte-full "$K_OLD" "chunk 2 (stored bytes $(chunk_at 2)-$(($(chunk_at 3) - 1))) does not authenticate"

reset_faulty
flip_byte "$DELTA" $((HDR + 30))
expect_refused flipped-byte-delta "$K_OLD" "chunk 0 (stored bytes $HDR-"

reset_faulty
flip_byte "$FULL" $((HDR - 5)) # the header check
expect_refused flipped-byte-header "$K_OLD" 'wrong key or not ours: key id \"k1\"'

reset_faulty
truncate -s "$(chunk_at 3)" "$FULL"
expect_refused truncated-at-chunk-boundary "$K_OLD" "the object ends after chunk 2 (stored byte $(chunk_at 3)) without its final chunk"

reset_faulty
truncate -s $(($(chunk_at 3) + 500)) "$FULL"
expect_refused truncated-mid-chunk "$K_OLD" "truncated: chunk 3 at stored byte $(chunk_at 3) ends after 500 of its $FRAME bytes"

reset_faulty
size=$(stat -c %s "$FULL")
{
    bytes_of "$FULL" 0 "$(chunk_at 1)"
    bytes_of "$FULL" "$(chunk_at 2)" $FRAME
    bytes_of "$FULL" "$(chunk_at 1)" $FRAME
    bytes_of "$FULL" "$(chunk_at 3)" $((size - $(chunk_at 3)))
} >"$WORK/reordered"
[ "$(stat -c %s "$WORK/reordered")" = "$size" ] || fail "reordering changed the size"
cp "$WORK/reordered" "$FULL"
expect_refused reordered-chunks "$K_OLD" "chunk 1 (stored bytes $(chunk_at 1)-$(($(chunk_at 2) - 1))) is the object's chunk 2: chunks were dropped or reordered"

reset_faulty
{
    bytes_of "$FULL" 0 "$(chunk_at 1)"
    bytes_of "$FULL" "$(chunk_at 2)" $((size - $(chunk_at 2)))
} >"$WORK/dropped"
cp "$WORK/dropped" "$FULL"
expect_refused dropped-chunk "$K_OLD" "chunk 1 (stored bytes $(chunk_at 1)-$(($(chunk_at 2) - 1))) is the object's chunk 2"

reset_faulty
printf 'more' >>"$FULL"
expect_refused appended-bytes "$K_OLD" "bytes after the final chunk $((nchunks)), from stored byte $size"

# ---- 3. key rotation on s3rver: full under k1, deltas under k2 ----
R=$WORK/rot
mkdir -p "$R"
start_etcd rot "$R/src.etcd"
src_ep=$ETCD_EP
src_pid=$ETCD_PID
for i in $(seq 1 30); do ectl put "/registry/rot/before-$i" "v$i" >/dev/null; done
ROTFLAGS=("${S3FLAGS[@]}" --store-prefix=rot --snapstore-temp-directory="$R/snaptmp"
    --schedule='0 0 1 1 *' --garbage-collection-period=0s --delta-snapshot-period=1s
    --log-level=debug)
ETCDBR_ENCRYPTION_KEY_FILE=$K_OLD "$ETCDBR_BIN" snapshot --endpoints="$src_ep" "${ROTFLAGS[@]}" >"$R/snap-old.log" 2>&1 &
SNAP_PID=$!
PIDS+=("$SNAP_PID")
wait_for_log "$R/snap-old.log" "full snapshot Full-" 60
for i in $(seq 1 10); do ectl put "/registry/rot/old-delta-$i" "v$i" >/dev/null; done
wait_for_log "$R/snap-old.log" "delta snapshot Incr-" 30
stop_snapshotter
ETCDBR_ENCRYPTION_KEY_FILE=$K_ROT "$ETCDBR_BIN" snapshot --endpoints="$src_ep" "${ROTFLAGS[@]}" >"$R/snap-new.log" 2>&1 &
SNAP_PID=$!
PIDS+=("$SNAP_PID")
for i in $(seq 1 10); do ectl put "/registry/rot/new-delta-$i" "v$i" >/dev/null; done
ectl del /registry/rot/before-3 >/dev/null
wait_for_log "$R/snap-new.log" "delta snapshot Incr-" 30
stop_snapshotter
grep -F 'new snapshots are encrypted with key id \"k2\"' "$R/snap-new.log" >/dev/null || fail "rotation: the restarted snapshotter does not say it encrypts with k2"
! grep "full snapshot Full-" "$R/snap-new.log" >/dev/null || fail "rotation: the restarted snapshotter took a new full snapshot instead of resuming"
src_rev=$(current_revision "$src_ep")
dump_keys "$src_ep" >"$R/src.jsonl"
stop_pid "$src_pid"
d=$BUCKET_DIR/rot/v2
k1_objs=0 k2_objs=0
for f in "$d"/*._S3rver_object; do
    case "$(bytes_of "$f" 15 2)" in
    k1) k1_objs=$((k1_objs + 1)) ;;
    k2) k2_objs=$((k2_objs + 1)) ;;
    *) fail "rotation: $f has neither key id" ;;
    esac
done
full=$(ls "$d"/Full-*._S3rver_object)
[ "$(bytes_of "$full" 15 2)" = k1 ] || fail "rotation: the full snapshot is not under k1"
[ "$k1_objs" -ge 2 ] && [ "$k2_objs" -ge 1 ] || fail "rotation: $k1_objs objects under k1, $k2_objs under k2"
rot_restore() { # LABEL KEYFILE
    DATA=$R/restored-$1.etcd
    LOG=$R/restore-$1.log
    RC=0
    ETCDBR_ENCRYPTION_KEY_FILE=$2 "$ETCDBR_BIN" restore "${S3FLAGS[@]}" --store-prefix=rot --log-level=debug \
        --data-dir="$DATA" --name=rot-restored \
        --initial-cluster=rot-restored=http://127.0.0.1:2380 \
        --initial-advertise-peer-urls=http://127.0.0.1:2380 \
        --restoration-temp-snapshots-dir="$DATA.tmp" >"$LOG" 2>&1 || RC=$?
}
rot_restore rotated "$K_ROT"
[ "$RC" = 0 ] || {
    cat "$LOG" >&2
    fail "rotation: restore of the mixed set with the rotated key file failed"
}
start_etcd rot-restored "$DATA"
dump_keys "$ETCD_EP" >"$R/restored.jsonl"
rev=$(current_revision "$ETCD_EP")
stop_pid "$ETCD_PID"
[ "$rev" = "$src_rev" ] || fail "rotation: revision $rev after restore, source $src_rev"
cmp -s "$R/src.jsonl" "$R/restored.jsonl" || fail "rotation: keyspace differs after restore"
echo "PASS: rotation: $k1_objs objects under k1 (the full snapshot among them), $k2_objs under k2 restore together (revision $rev)"
rot_restore old-only "$K_OLD"
[ "$RC" != 0 ] || fail "rotation: the old key file alone restored objects written under k2"
grep -F 'encrypted with key id \"k2\", which is not among the keys given (k1)' "$LOG" >/dev/null || {
    cat "$LOG" >&2
    fail "rotation: the old key file's error does not name key id k2"
}
[ ! -e "$DATA" ] || fail "rotation: the refused restore left $DATA"
echo "PASS: rotation: the old key file alone is refused and names key id k2"

# ---- key sources: the environment variable, a loose file mode, a malformed file, both given ----
rot_restore_env() { # LABEL: rot_restore with the keys in ETCDBR_ENCRYPTION_KEYS, no key file
    DATA=$R/restored-$1.etcd
    LOG=$R/restore-$1.log
    RC=0
    env -u ETCDBR_ENCRYPTION_KEY_FILE ETCDBR_ENCRYPTION_KEYS="$(cat "$K_ROT")" \
        "$ETCDBR_BIN" restore "${S3FLAGS[@]}" --store-prefix=rot --log-level=debug \
        --data-dir="$DATA" --name=rot-restored \
        --initial-cluster=rot-restored=http://127.0.0.1:2380 \
        --initial-advertise-peer-urls=http://127.0.0.1:2380 \
        --restoration-temp-snapshots-dir="$DATA.tmp" >"$LOG" 2>&1 || RC=$?
}
rot_restore_env from-env
[ "$RC" = 0 ] || {
    cat "$LOG" >&2
    fail "keys from ETCDBR_ENCRYPTION_KEYS: restore failed"
}
grep -F "2 key(s) from ETCDBR_ENCRYPTION_KEYS" "$LOG" >/dev/null || fail "keys from the environment: not said"
echo "PASS: keys from ETCDBR_ENCRYPTION_KEYS restore the mixed set"

loose=$WORK/keys-loose
cp "$K_ROT" "$loose"
chmod 644 "$loose"
rot_restore loose-mode "$loose"
[ "$RC" = 0 ] || fail "a key file of mode 0644: restore failed"
grep -F "may be read by group or others (mode 0644)" "$LOG" >/dev/null || fail "a key file of mode 0644: no warning"
echo "PASS: a key file others may read works with a warning"

bad=$(keyfile keys-malformed "k1 $KEY1" "k3 not-a-key")
rot_restore malformed "$bad"
[ "$RC" = 2 ] || fail "a malformed key file: exit $RC, want 2 (usage)"
grep -F "key file $bad line 2: the key is not standard base64" "$LOG" >/dev/null || {
    cat "$LOG" >&2
    fail "a malformed key file: the error does not name line 2"
}
[ ! -e "$DATA" ] || fail "a malformed key file: restore left $DATA"
DATA=$R/restored-both.etcd
RC=0
ETCDBR_ENCRYPTION_KEYS="$(cat "$K_ROT")" ETCDBR_ENCRYPTION_KEY_FILE=$K_ROT "$ETCDBR_BIN" restore \
    "${S3FLAGS[@]}" --store-prefix=rot --data-dir="$DATA" >"$R/restore-both.log" 2>&1 || RC=$?
[ "$RC" = 2 ] || fail "both key sources: exit $RC, want 2"
grep -F "give the keys one way" "$R/restore-both.log" >/dev/null || fail "both key sources: no clear error"
echo "PASS: a malformed key file and two key sources are refused (exit 2) naming the problem"

# ---- 4. no key material in any log ----
# self-check: the search finds a key where one is (the key files)
grep -rlF --include='keys-*' -e "$KEY1" "$WORK" >/dev/null || fail "the key search finds nothing even in the key files"
for k in "$KEY1" "$KEY2" "$KEYBAD"; do
    rc=0
    hits=$(grep -rlF --include='*.log' -e "$k" "$WORK") || rc=$?
    [ "$rc" = 1 ] || fail "key material in: $hits (grep exit $rc)"
done
nlogs=$(find "$WORK" -name '*.log' | wc -l)
echo "PASS: none of the $nlogs logs holds a key (debug level included)"
