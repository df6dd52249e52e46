# history_gen.sh: random write histories for a real etcd, from a seed (sourced after lib.sh).
# gen_init SEED DIR, then gen_before_snapshot (lands in the full snapshot), then, with the
# snapshotter running, gen_after_snapshot (lands in deltas). Every op goes through etcdctl of the
# etcd version on PATH (ectl, $ETCD_EP). Deterministic for a seed: every choice comes from bash's
# RANDOM seeded with it, read only in this shell (never in a subshell), and values are AES-CTR
# keystream keyed by seed and op number. Lease IDs come from etcd, so they differ between runs.
# The ops, one per line, go to DIR/ops.log; GEN_LEASES_PRE and GEN_LEASES_POST hold the leases
# granted before and after the snapshot, GEN_LEASE_SHORT the 15 s one (hex IDs). RANDOM's
# sequence is bash's (5.2 here): a seed replays the same history with the same bash.

GEN_BIG_MAX=1572864 # 1.5 MiB: the largest value (etcd must run with --max-request-bytes > 3 MiB)

# gen_init SEED DIR
gen_init() {
    GEN_SEED=$1
    GEN_DIR=$2
    mkdir -p "$GEN_DIR"
    : >"$GEN_DIR/ops.log"
    RANDOM=$GEN_SEED
    GEN_OP=0
    GEN_NEXT_KEY=0
    GEN_KEYS_OLD=()   # keys created before the snapshot (may be dead by now)
    GEN_KEYS_FRESH=() # keys created after it
    GEN_DEAD=()       # keys deleted at some point
    declare -gA GEN_LIVE=() # key -> lease (hex) or 0, for every live key
    declare -gA GEN_LEASE_KEYS=() # lease -> number of puts with it (revocation candidates)
    GEN_LEASES_PRE=()
    GEN_LEASES_POST=()
    GEN_LEASES=() # leases a put may attach now
    GEN_LEASE_SHORT="" # the 15 s lease granted near the end
    GEN_BIG_LEFT=0
}

# rnd N: R = a number in [0, N), from the seeded RANDOM (30 bits).
rnd() { R=$((((RANDOM << 15) | RANDOM) % $1)); }

gen_log() { echo "$GEN_OP $*" >>"$GEN_DIR/ops.log"; }

# gen_value SIZE: writes SIZE bytes (binary, any byte) to $GEN_DIR/val.
gen_value() {
    local n=$1
    GEN_OP=$((GEN_OP + 1))
    if [ "$n" = 0 ]; then
        : >"$GEN_DIR/val"
        return
    fi
    head -c "$n" /dev/zero | openssl enc -aes-128-ctr \
        -K "$(printf '%016x%016x' "$GEN_SEED" "$GEN_OP")" -iv 00000000000000000000000000000000 \
        >"$GEN_DIR/val"
}

# gen_text_value: V = a short value without spaces or quotes (txn lines carry it), maybe empty.
gen_text_value() {
    local pad
    rnd 12
    if [ "$R" = 0 ]; then
        V='""'
    else
        rnd 200
        printf -v pad '%*s' "$R" ''
        V="v$GEN_OP-$RANDOM-${pad// /x}"
    fi
}

# gen_size: R = a value size: mostly small, some KiB, a few 0 B.
gen_size() {
    rnd 100
    if [ "$R" -lt 6 ]; then R=0
    elif [ "$R" -lt 50 ]; then rnd 100; R=$((R + 1))
    elif [ "$R" -lt 90 ]; then rnd 4096
    else rnd 65536; fi
}

gen_new_key() {
    rnd 6
    K=/h/g$R/k$GEN_NEXT_KEY
    GEN_NEXT_KEY=$((GEN_NEXT_KEY + 1))
}

# gen_pick_live ARRAY_NAME: K = a live key from that list, or "" after a few misses.
gen_pick_live() {
    local -n arr=$1
    local i
    K=""
    [ ${#arr[@]} -gt 0 ] || return 0
    for i in 1 2 3 4 5 6 7 8; do
        rnd ${#arr[@]}
        if [ -n "${GEN_LIVE[${arr[$R]}]+x}" ]; then
            K=${arr[$R]}
            return 0
        fi
    done
}

# gen_pick_lease: L = a lease to attach (or "" when none or by chance).
gen_pick_lease() {
    L=""
    [ ${#GEN_LEASES[@]} -gt 0 ] || return 0
    rnd ${#GEN_LEASES[@]}
    L=${GEN_LEASES[$R]}
}

# gen_grant TTL: L = a new lease's hex ID.
gen_grant() {
    L=$(ectl lease grant "$1" | awk '/granted/ {print $2}')
    [ -n "$L" ] || fail "seed=$GEN_SEED: lease grant $1 failed"
    GEN_LEASE_KEYS[$L]=0
    gen_log "lease grant $1 -> $L"
}

# gen_put KEY SIZE [LEASE]
gen_put() {
    local k=$1 n=$2 l=${3:-}
    gen_value "$n"
    gen_log "put $k size=$n lease=${l:-0}"
    if [ "$n" = 0 ]; then
        ectl put "$k" "" ${l:+--lease="$l"} >/dev/null || fail "seed=$GEN_SEED: put $k failed"
    else
        ectl put "$k" ${l:+--lease="$l"} <"$GEN_DIR/val" >/dev/null || fail "seed=$GEN_SEED: put $k ($n B) failed"
    fi
    GEN_LIVE[$k]=${l:-0}
    [ -z "$l" ] || GEN_LEASE_KEYS[$l]=$((GEN_LEASE_KEYS[$l] + 1))
}

gen_forget() {
    unset "GEN_LIVE[$1]"
    GEN_DEAD+=("$1")
}

gen_del() {
    gen_log "del $1"
    ectl del "$1" >/dev/null || fail "seed=$GEN_SEED: del $1 failed"
    gen_forget "$1"
}

# gen_del_prefix P: DeleteRange over the prefix.
gen_del_prefix() {
    local p=$1 k
    gen_log "del --prefix $p"
    ectl del --prefix "$p" >/dev/null || fail "seed=$GEN_SEED: del --prefix $p failed"
    for k in "${!GEN_LIVE[@]}"; do
        [[ "$k" != "$p"* ]] || gen_forget "$k"
    done
}

# gen_txn N_OPS: one txn (one revision) of puts (new keys, overwrites, some leased) and deletes
# (of distinct keys: etcd rejects a txn touching a key twice).
gen_txn() {
    local n=$1 i lines="" desc="" k
    local -A used=()
    local -a puts=() dels=() leases=()
    for i in $(seq 1 "$n"); do
        rnd 10
        if [ "$R" -lt 4 ]; then
            gen_new_key
        elif [ "$R" -lt 7 ]; then
            gen_pick_live GEN_KEYS_FRESH
            [ -n "$K" ] || gen_pick_live GEN_KEYS_OLD
            [ -n "$K" ] || gen_new_key
        else
            gen_pick_live GEN_KEYS_OLD
            [ -n "$K" ] || gen_pick_live GEN_KEYS_FRESH
            if [ -n "$K" ] && [ -z "${used[$K]+x}" ]; then
                used[$K]=1
                dels+=("$K")
                lines+="del $K"$'\n'
                desc+=" del:$K"
            fi
            continue
        fi
        [ -z "${used[$K]+x}" ] || continue
        used[$K]=1
        gen_text_value
        L=""
        rnd 4
        [ "$R" != 0 ] || gen_pick_lease
        puts+=("$K")
        leases+=("${L:-0}")
        lines+="put $K $V${L:+ --lease=$L}"$'\n'
        desc+=" put:$K${L:+@$L}"
        if [ -z "${GEN_LIVE[$K]+x}" ]; then
            if [ "$GEN_PHASE" = pre ]; then GEN_KEYS_OLD+=("$K"); else GEN_KEYS_FRESH+=("$K"); fi
        fi
    done
    [ -n "$lines" ] || return 0
    gen_log "txn$desc"
    printf '\n%s\n\n' "$lines" | ectl txn >"$GEN_DIR/txn.out" 2>&1 || {
        cat "$GEN_DIR/txn.out" >&2
        fail "seed=$GEN_SEED: txn failed"
    }
    grep -q '^SUCCESS' "$GEN_DIR/txn.out" || { cat "$GEN_DIR/txn.out" >&2; fail "seed=$GEN_SEED: txn did not succeed"; }
    for k in "${dels[@]}"; do gen_forget "$k"; done
    for i in "${!puts[@]}"; do
        GEN_LIVE[${puts[$i]}]=${leases[$i]}
        [ "${leases[$i]}" = 0 ] || GEN_LEASE_KEYS[${leases[$i]}]=$((GEN_LEASE_KEYS[${leases[$i]}] + 1))
    done
}

# gen_put_new [LEASE|-]: a put of a new key (a random lease now and then unless given; - = none).
gen_put_new() {
    local l=${1:-}
    gen_new_key
    local k=$K
    if [ -z "$l" ]; then
        L=""
        rnd 5
        [ "$R" != 0 ] || gen_pick_lease
        l=$L
    fi
    [ "$l" != - ] || l=""
    gen_size
    gen_put "$k" "$R" "$l"
    if [ "$GEN_PHASE" = pre ]; then GEN_KEYS_OLD+=("$k"); else GEN_KEYS_FRESH+=("$k"); fi
}

gen_overwrite() {
    rnd 2
    if [ "$R" = 0 ]; then gen_pick_live GEN_KEYS_OLD; else gen_pick_live GEN_KEYS_FRESH; fi
    [ -n "$K" ] || gen_pick_live GEN_KEYS_OLD
    [ -n "$K" ] || return 0
    local k=$K
    L=""
    rnd 6
    [ "$R" != 0 ] || gen_pick_lease
    local l=$L
    gen_size
    gen_put "$k" "$R" "$l"
}

gen_big() {
    gen_new_key
    local k=$K n
    if [ "$GEN_BIG_LEFT" = 1 ]; then n=$GEN_BIG_MAX; else rnd $((GEN_BIG_MAX - 65536)); n=$((R + 65536)); fi
    GEN_BIG_LEFT=$((GEN_BIG_LEFT - 1))
    gen_put "$k" "$n"
    if [ "$GEN_PHASE" = pre ]; then GEN_KEYS_OLD+=("$k"); else GEN_KEYS_FRESH+=("$k"); fi
}

# gen_revoke_one: revokes a lease that has keys (their deletes share one revision).
gen_revoke_one() {
    local l c=()
    for l in "${GEN_LEASES[@]}"; do [ "${GEN_LEASE_KEYS[$l]}" = 0 ] || c+=("$l"); done
    [ ${#c[@]} -gt 0 ] || return 0
    rnd ${#c[@]}
    l=${c[$R]}
    gen_log "lease revoke $l"
    ectl lease revoke "$l" >/dev/null || fail "seed=$GEN_SEED: lease revoke $l failed"
    local k
    for k in "${!GEN_LIVE[@]}"; do [ "${GEN_LIVE[$k]}" != "$l" ] || gen_forget "$k"; done
    local keep=()
    for k in "${GEN_LEASES[@]}"; do [ "$k" = "$l" ] || keep+=("$k"); done
    GEN_LEASES=("${keep[@]}")
}

# gen_before_snapshot: keys, overwrites, deletes, a txn, leases (long and 60 s, one with no key)
# with keys on them: all of it is in the full snapshot.
gen_before_snapshot() {
    GEN_PHASE=pre
    local i
    gen_grant 3600
    GEN_LEASES_PRE+=("$L")
    # outside every prefix the history deletes, never written again: a leased key surely in the
    # full snapshot (its lease is not offered for revocation either)
    gen_put /h/pinned/pre-lease 100 "$L"
    gen_put_new "$L"
    gen_grant 60
    GEN_LEASES_PRE+=("$L")
    GEN_LEASES+=("$L")
    gen_put /h/pinned/pre-lease-60s 10 "$L" # gone only if the history revokes its lease
    gen_put_new "$L"
    gen_grant 1200 # no key ever: only the full snapshot knows it
    GEN_LEASES_PRE+=("$L")
    rnd 12
    for i in $(seq 1 $((10 + R))); do
        rnd 10
        if [ "$R" -lt 6 ]; then gen_put_new; elif [ "$R" -lt 8 ]; then gen_overwrite; else
            gen_pick_live GEN_KEYS_OLD
            [ -z "$K" ] || gen_del "$K"
        fi
    done
    gen_txn 3
    rnd 3
    if [ "$R" = 0 ]; then GEN_BIG_LEFT=1 && gen_big; fi
}

# gen_after_snapshot: 40-64 ops of every kind, 1-3 values of 64 KiB-1.5 MiB (one of exactly
# 1.5 MiB), a long lease granted early, a 15 s lease granted near the end with keys put on it.
gen_after_snapshot() {
    GEN_PHASE=post
    local n i k big_at=() short_at
    rnd 25
    n=$((40 + R))
    rnd 3
    GEN_BIG_LEFT=$((R + 1))
    for i in $(seq 1 "$GEN_BIG_LEFT"); do
        rnd "$n"
        big_at+=("$R")
    done
    short_at=$((n - 7))
    gen_grant 1800
    GEN_LEASES_POST+=("$L")
    GEN_LEASES+=("$L")
    gen_put_new "$L"
    for i in $(seq 0 $((n - 1))); do
        for k in "${big_at[@]}"; do [ "$k" != "$i" ] || gen_big; done
        if [ "$i" = "$short_at" ]; then
            # a short lease, still alive when the history ends; later puts attach it often
            gen_grant 15
            GEN_LEASE_SHORT=$L
            GEN_LEASES_POST+=("$L")
            GEN_LEASES=("$L" "$L" "$L" "${GEN_LEASES[@]}")
            gen_put_new "$L"
            gen_pick_live GEN_KEYS_OLD
            [ -z "$K" ] || gen_put "$K" 7 "$L"
        fi
        rnd 100
        if [ "$R" -lt 24 ]; then
            gen_put_new
        elif [ "$R" -lt 44 ]; then
            gen_overwrite
        elif [ "$R" -lt 52 ]; then
            gen_pick_live GEN_KEYS_OLD
            [ -z "$K" ] || gen_del "$K"
        elif [ "$R" -lt 60 ]; then
            gen_pick_live GEN_KEYS_FRESH
            [ -z "$K" ] || gen_del "$K"
        elif [ "$R" -lt 68 ]; then
            # create then delete in the next revision
            gen_new_key
            k=$K
            gen_size
            gen_put "$k" "$R"
            gen_del "$k"
        elif [ "$R" -lt 71 ]; then
            # a whole group or the keys k<digit>* of one
            rnd 6
            k=/h/g$R/
            rnd 3
            [ "$R" = 0 ] || { rnd 10 && k+="k$R"; }
            gen_del_prefix "$k"
        elif [ "$R" -lt 84 ]; then
            rnd 5
            gen_txn $((R + 2))
        elif [ "$R" -lt 90 ]; then
            # a deleted key put again (its version starts over)
            if [ ${#GEN_DEAD[@]} -gt 0 ]; then
                rnd ${#GEN_DEAD[@]}
                k=${GEN_DEAD[$R]}
                if [ -z "${GEN_LIVE[$k]+x}" ]; then
                    gen_size
                    gen_put "$k" "$R"
                    GEN_KEYS_FRESH+=("$k")
                fi
            fi
        elif [ "$R" -lt 93 ] && [ "$i" -lt "$short_at" ]; then
            gen_grant $((300 + RANDOM % 3000))
            GEN_LEASES_POST+=("$L")
            GEN_LEASES+=("$L")
            gen_put_new "$L"
        elif [ "$R" -lt 95 ] && [ "$i" -lt "$short_at" ]; then
            gen_revoke_one
        else
            gen_put_new
        fi
    done
    # the end: a put on the short lease, so one is surely in the last delta
    gen_put_new "${GEN_LEASES[0]}"
}
