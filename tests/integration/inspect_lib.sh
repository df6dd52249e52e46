# inspect_lib.sh: random write histories over several backup sets, and the checks of `get`,
# `diff` and `history` against the live etcd that took them (sourced after lib.sh by
# test_inspect_*.sh). The live etcd is never compacted, so `etcdctl get --rev R` answers every R
# and `etcdctl watch --rev 1` replays every event: what docs/inspect.md promises to match.
# Every choice comes from bash's RANDOM, seeded by the caller and read only in this shell.
INSPECT_CHECK=$ETCDBR_SOURCE_DIR/tests/integration/inspect_check.py

ins_rnd() { R=$((((RANDOM << 15) | RANDOM) % $1)); }

# ins_begin VERSION SEED: one seeded run's start: etcd VERSION as "src" in its own work dir, the
# generator seeded, no problems yet.
ins_begin() {
    echo "== etcd $1 seed=$2"
    use_etcd "$1"
    sub_workdir "$1-$2"
    start_etcd src "$WORK/src.etcd" --unsafe-no-fsync
    RANDOM=$2
    ins_init
    INS_PROBLEMS=()
}

# ins_init: the generator's state (call after RANDOM=seed and start_etcd).
ins_init() {
    INS_KEYS=()
    INS_OP=0
    declare -gA INS_VAL=()  # key -> its value now (unset: not alive)
    INS_LEASE=$(ectl lease grant 3600 | awk '/granted/ {print $2}')
    [ -n "$INS_LEASE" ] || fail "lease grant failed"
    INS_SHORT=""            # a lease with keys on it, revoked later (its deletes share a revision)
    INS_GAPS=()             # "TIME REV": a time after REV was stored, before the next write
    INS_OPS_LOG=$WORK/ops.log
    : >"$INS_OPS_LOG"
}

# ins_key: K = a key, often one written before; names that are prefixes of each other.
ins_key() {
    ins_rnd 10
    if [ ${#INS_KEYS[@]} -gt 0 ] && [ "$R" -lt 6 ]; then
        ins_rnd ${#INS_KEYS[@]}
        K=${INS_KEYS[$R]}
        return 0
    fi
    ins_rnd 9
    case $R in
    0) K=/a ;;
    1) K=/a/b ;;
    2) ins_rnd 3 && K=/a/b$R ;;
    3) ins_rnd 12 && K=/reg/g$((R % 3))/k$R ;;
    4) ins_rnd 100 && K=/reg/g1/k$R ;;
    5) ins_rnd 5 && K=key$R ;;
    6) ins_rnd 40 && K=/reg/pods/ns$((R % 4))/p$R ;;
    7) K=/a/ ;;
    8) ins_rnd 20 && K="/sp ace/é$R" ;;
    esac
    INS_KEYS+=("$K")
}

# ins_value: V = a value without spaces (txn lines carry it): mostly short, some 2-8 KiB, some "".
ins_value() {
    local pad
    INS_OP=$((INS_OP + 1))
    ins_rnd 20
    if [ "$R" = 0 ]; then
        V=""
    elif [ "$R" = 1 ]; then
        ins_rnd 6144
        printf -v pad '%*s' $((R + 2048)) ''
        V="big$INS_OP-${pad// /z}"
    else
        ins_rnd 60
        printf -v pad '%*s' "$R" ''
        V="v$INS_OP-$RANDOM${pad// /x}"
    fi
}

ins_log() { echo "$INS_OP $*" >>"$INS_OPS_LOG"; }

# ins_put KEY VALUE [LEASE]
ins_put() {
    ins_log "put $1 (${#2} B)${3:+ lease $3}"
    ectl put ${3:+--lease="$3"} "$1" "$2" >/dev/null || fail "put $1 failed"
    INS_VAL[$1]=$2
}

ins_del() {
    ins_log "del $*"
    ectl del "$@" >/dev/null || fail "del $* failed"
    local k
    if [ "$1" = --prefix ]; then
        for k in "${!INS_VAL[@]}"; do [[ "$k" != "$2"* ]] || unset "INS_VAL[$k]"; done
    else
        unset "INS_VAL[$1]"
    fi
}

# ins_txn N: one txn (one revision) of puts and deletes of distinct keys.
ins_txn() {
    local n=$1 i lines="" desc=""
    local -A used=() puts=()
    local -a dels=()
    for i in $(seq 1 "$n"); do
        ins_key
        case "$K" in *[[:space:]]*) continue ;; esac # a txn line is split at spaces and tabs
        [ -z "${used[$K]+x}" ] || continue
        used[$K]=1
        ins_rnd 3
        if [ "$R" = 0 ]; then
            lines+="del $K"$'\n'
            dels+=("$K")
            desc+=" del:$K"
        else
            ins_value
            [ -n "$V" ] || V=e
            lines+="put $K $V"$'\n'
            puts[$K]=$V
            desc+=" put:$K"
        fi
    done
    [ -n "$lines" ] || return 0
    ins_log "txn$desc"
    printf '\n%s\n\n' "$lines" | ectl txn >"$WORK/txn.out" 2>&1 || { cat "$WORK/txn.out" >&2; fail "txn failed"; }
    grep -q '^SUCCESS' "$WORK/txn.out" || { cat "$WORK/txn.out" >&2; fail "txn did not succeed"; }
    for K in "${dels[@]}"; do unset "INS_VAL[$K]"; done
    for K in "${!puts[@]}"; do INS_VAL[$K]=${puts[$K]}; done
}

# ins_live: K = a live key ("" when none).
ins_live() {
    local live=("${!INS_VAL[@]}")
    K=""
    [ ${#live[@]} -gt 0 ] || return 0
    ins_rnd ${#live[@]}
    K=${live[$R]}
}

# ins_op: one random write (or none: a delete of a dead key writes no revision).
ins_op() {
    ins_rnd 100
    if [ "$R" -lt 38 ]; then
        ins_key && ins_value && ins_put "$K" "$V"
    elif [ "$R" -lt 48 ]; then
        # the same value again: a new mod revision and version, nothing else
        ins_live
        [ -z "$K" ] || ins_put "$K" "${INS_VAL[$K]}"
    elif [ "$R" -lt 60 ]; then
        ins_live
        [ -z "$K" ] || ins_del "$K"
    elif [ "$R" -lt 63 ]; then
        ins_rnd 5
        case $R in 0) ins_del --prefix /a/b ;; 1) ins_del --prefix /reg/g1/k1 ;;
        2) ins_del --prefix /reg/pods/ns2/ ;; 3) ins_del --prefix /a ;; 4) ins_del --prefix key ;; esac
    elif [ "$R" -lt 73 ]; then
        ins_rnd 4
        ins_txn $((R + 2))
    elif [ "$R" -lt 80 ]; then
        ins_key && ins_value && ins_put "$K" "$V" "$INS_LEASE"
    elif [ "$R" -lt 83 ]; then
        if [ -z "$INS_SHORT" ]; then
            INS_SHORT=$(ectl lease grant 600 | awk '/granted/ {print $2}')
            ins_log "lease grant -> $INS_SHORT"
        fi
        ins_key && ins_value && ins_put "$K" "$V" "$INS_SHORT"
    elif [ "$R" -lt 85 ] && [ -n "$INS_SHORT" ]; then
        ins_log "lease revoke $INS_SHORT"
        ectl lease revoke "$INS_SHORT" >/dev/null || fail "lease revoke failed"
        # its keys stay in INS_VAL: a later delete of one writes nothing, a rewrite creates it
        INS_SHORT=""
    elif [ "$R" -lt 90 ]; then
        # a key and value with bytes argv carries but a shell name would not (0xff, tab, +=%)
        ins_rnd 4
        K=$(printf '/bin/\xff\t+=%%%d' "$R")
        INS_KEYS+=("$K")
        ins_value
        ins_log "gw put /bin/..$R"
        gw_put "$ETCD_EP" "$(printf '%s' "$K" | base64 -w0)" "$(printf '\x00\x01%s\xfe' "$V" | base64 -w0)" ||
            fail "gateway put failed"
        INS_VAL[$K]=x
    else
        ins_key && ins_value && ins_put "$K" "$V"
    fi
}

# ins_wave N: N ops.
ins_wave() {
    local i
    for i in $(seq 1 "$1"); do ins_op; done
}

# ins_gap LOG...: waits until the snapshotters logging to LOG... stored etcd's current revision,
# then records "TIME REV" in INS_GAPS (a --time there must answer REV: nothing is written until
# the next wave). Objects are named in whole Unix seconds, and a full snapshot named in the
# target time's own second counts as after it (docs/inspect.md): the time is taken once the
# clock has left the second in which REV was seen stored.
ins_gap() {
    local rev log s0
    rev=$(current_revision "$ETCD_EP")
    for log in "$@"; do wait_stored "$log" "$rev"; done
    s0=$(date +%s)
    while [ "$(date +%s)" -le "$s0" ]; do sleep 0.05; done
    INS_GAPS+=("$(date -u +%Y-%m-%dT%H:%M:%S.%NZ) $rev")
}

# ins_layout STORE: prints "full F" and "delta A B" lines, by revision (the store's v2 names).
ins_layout() {
    ls "$1/v2" | awk -F- '/^Full-/ {print "full", $3 + 0} /^Incr-/ {print "delta", $2 + 0, $3 + 0}' |
        sort -k2,2n -k1,1r
}

# ins_pick_revisions STORE: INS_REVS = "REV CLASS" lines to check: inside the first full snapshot
# (older than every full), each full's revision, inside some deltas and their ends, in the gap
# between a set's last delta and the next full snapshot, the newest.
ins_pick_revisions() {
    local store=$1 kind a b prev_end=0 first_full="" last=0 line
    local -a cand=()
    while read -r kind a b; do
        if [ "$kind" = full ]; then
            if [ -z "$first_full" ]; then
                first_full=$a
                [ "$a" -le 2 ] || { ins_rnd $((a - 2)) && cand+=("$((R + 2)) older-than-every-full"); }
            elif [ "$prev_end" -gt 0 ] && [ $((prev_end + 1)) -lt "$a" ]; then
                ins_rnd $((a - prev_end - 1))
                cand+=("$((prev_end + 1 + R)) gap-before-full-$a")
            fi
            cand+=("$a full")
            [ "$a" -le "$last" ] || last=$a
        else
            ins_rnd $((b - a + 1))
            cand+=("$((a + R)) in-delta-$a-$b")
            ins_rnd 3
            [ "$R" != 0 ] || cand+=("$b delta-end")
            prev_end=$b
            [ "$b" -le "$last" ] || last=$b
        fi
    done < <(ins_layout "$store")
    cand+=("$last newest")
    INS_REVS=$(printf '%s\n' "${cand[@]}" | sort -n -u)
    INS_LAST=$last
}

# ectl_dump REV [etcdctl get flags...]: the live etcd's answer at REV, cached in $WORK/ectl/.
ectl_dump() {
    local rev=$1 f
    shift
    mkdir -p "$WORK/ectl"
    f=$WORK/ectl/$rev$(printf '%s' "$*" | tr -c 'a-zA-Z0-9' _).json
    [ -s "$f" ] || ectl get "$@" --rev="$rev" -w json >"$f" || fail "etcdctl get --rev=$rev $* failed"
    ECTL_OUT=$f
}

# ins_run LABEL OUT CMD...: etcdbrctl CMD with the store flags (INS_FLAGS); OUT gets stdout,
# OUT.err stderr; INS_RC the exit code; INS_CMD the command line (for reports).
ins_run() {
    local label=$1 out=$2
    shift 2
    INS_CMD="etcdbrctl $* ${INS_FLAGS[*]}"
    INS_RC=0
    "$ETCDBR_BIN" "$@" "${INS_FLAGS[@]}" >"$out" 2>"$out.err" || INS_RC=$?
}

# ins_problem WHAT: records a failed assertion (the run goes on; ins_verdict fails it).
ins_problem() {
    INS_PROBLEMS+=("$1")
    echo "PROBLEM: $1" >&2
}

# ins_check_get LABEL REV [etcdbrctl args...] -- [etcdctl args...]: get at REV (--revision REV,
# or the given selector) equals etcdctl get --rev REV.
ins_check_get() {
    local label=$1 rev=$2 out
    shift 2
    local ours=() theirs=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do ours+=("$1") && shift; done
    shift
    theirs=("$@")
    out=$WORK/chk/get-$INS_STORE_LABEL-$label
    mkdir -p "$WORK/chk"
    ins_run "$label" "$out" get "${ours[@]}" -o json
    if [ "$INS_RC" != 0 ]; then
        ins_problem "[$INS_STORE_LABEL] get $label (rev $rev): exit $INS_RC: $(grep -m1 'level=error' "$out.err" | sed 's/.*msg=//') ($INS_CMD)"
        return 0
    fi
    ectl_dump "$rev" "${theirs[@]}"
    local opt=()
    # etcd 3.7 leaves the lease out of a --keys-only answer; 3.4-3.6 and etcdbrctl keep it
    case "$ETCD_VERSION ${theirs[*]}" in v3.7.*--keys-only*) opt=(--no-lease) ;; esac
    if ! python3 "$INSPECT_CHECK" get "$ECTL_OUT" "$out" "$rev" "${opt[@]}" >"$out.chk" 2>&1; then
        ins_problem "[$INS_STORE_LABEL] get $label differs from etcdctl get ${theirs[*]} --rev=$rev: $(head -c 1500 "$out.chk") ($INS_CMD)"
    fi
}

# ins_check_store LABEL STORE: every check of one store (INS_FLAGS: its flags).
ins_check_store() {
    INS_STORE_LABEL=$1
    local store=$2 rev class a b r key out i n
    ins_pick_revisions "$store"
    echo "[$1] layout: $(ins_layout "$store" | tr '\n' ' ')"
    echo "[$1] revisions: $(tr '\n' ' ' <<<"$INS_REVS")"
    local -a revs=()
    while read -r rev class; do
        revs+=("$rev")
        ins_check_get "$class-$rev" "$rev" "" --prefix --revision "$rev" -- "" --prefix
    done <<<"$INS_REVS"
    # the latest, without --revision
    ins_check_get latest "$INS_LAST" "" --prefix -- "" --prefix
    # ranges, --limit, --keys-only at one revision
    ins_rnd ${#revs[@]}
    r=${revs[$R]}
    ins_check_get "prefix-reg-$r" "$r" /reg/ --prefix --revision "$r" -- /reg/ --prefix
    ins_check_get "range-a-b-$r" "$r" /a /b --revision "$r" -- /a /b
    ins_check_get "from-key-$r" "$r" /reg/g1 --from-key --revision "$r" -- /reg/g1 --from-key
    ins_check_get "one-key-$r" "$r" /a --revision "$r" -- /a
    ins_check_get "limit-$r" "$r" "" --prefix --limit 3 --revision "$r" -- "" --prefix --limit 3
    ins_check_get "keys-only-$r" "$r" "" --prefix --keys-only --revision "$r" -- "" --prefix --keys-only

    # diff: random pairs of the checked revisions, the oldest and newest, one pair equal
    local -a pairs=("${revs[0]} ${revs[-1]}" "${revs[-1]} ${revs[-1]}")
    for i in 1 2 3 4; do
        ins_rnd ${#revs[@]} && a=${revs[$R]}
        ins_rnd ${#revs[@]} && b=${revs[$R]}
        [ "$a" -le "$b" ] || { r=$a && a=$b && b=$r; }
        pairs+=("$a $b")
    done
    for i in "${pairs[@]}"; do
        read -r a b <<<"$i"
        out=$WORK/chk/diff-$INS_STORE_LABEL-$a-$b
        ins_run diff "$out" diff --from-revision "$a" --to-revision "$b" -o json
        if [ "$INS_RC" != 0 ]; then
            ins_problem "[$1] diff $a $b: exit $INS_RC: $(grep -m1 'level=error' "$out.err" | sed 's/.*msg=//') ($INS_CMD)"
            continue
        fi
        ectl_dump "$a" "" --prefix && local fa=$ECTL_OUT
        ectl_dump "$b" "" --prefix
        python3 "$INSPECT_CHECK" diff "$fa" "$ECTL_OUT" "$out" "$a" "$b" "$WORK/events.jsonl" >"$out.chk" 2>&1 ||
            ins_problem "[$1] diff $a $b differs from the etcdctl dumps: $(head -c 1500 "$out.chk") ($INS_CMD)"
    done
    # diff with --prefix over one range
    out=$WORK/chk/diff-$INS_STORE_LABEL-reg
    ins_run diff "$out" diff --from-revision "${revs[0]}" --to-revision "$INS_LAST" /reg/ --prefix -o json
    ectl_dump "${revs[0]}" /reg/ --prefix && local fa=$ECTL_OUT
    ectl_dump "$INS_LAST" /reg/ --prefix
    [ "$INS_RC" = 0 ] && python3 "$INSPECT_CHECK" diff "$fa" "$ECTL_OUT" "$out" "${revs[0]}" "$INS_LAST" "$WORK/events.jsonl" >"$out.chk" 2>&1 ||
        ins_problem "[$1] diff /reg/ --prefix ${revs[0]} $INS_LAST: exit $INS_RC $(head -c 1500 "$out.chk" 2>/dev/null) $(grep -m1 'level=error' "$out.err" | sed 's/.*msg=//') ($INS_CMD)"

    # history of some keys: the busiest, deleted ones, binary ones, random ones
    local -a hkeys=()
    mapfile -t hkeys < <(python3 - "$WORK/events.jsonl" "$RANDOM" <<'PY'
import collections, json, random, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
random.seed(int(sys.argv[2]))
n = collections.Counter(e["key"] for e in ev)
dels = sorted({e["key"] for e in ev if e["type"] == "DELETE"})
keys = sorted(n)
pick = [n.most_common(1)[0][0]] + random.sample(dels, min(2, len(dels))) + random.sample(keys, min(3, len(keys)))
pick += [k for k in keys if k.startswith("L2Jpbi") ][:1]  # "/bin" in base64
print("\n".join(dict.fromkeys(pick)))
PY
    )
    for key in "${hkeys[@]}"; do
        out=$WORK/chk/history-$INS_STORE_LABEL-$(printf '%s' "$key" | tr -c 'a-zA-Z0-9' _)
        ins_run history "$out" history "$(printf '%s' "$key" | base64 -d)" -o json
        if [ "$INS_RC" != 0 ]; then
            ins_problem "[$1] history $(printf '%s' "$key" | base64 -d | cat -v): exit $INS_RC: $(grep -m1 'level=error' "$out.err" | sed 's/.*msg=//')"
            continue
        fi
        python3 "$INSPECT_CHECK" history "$WORK/events.jsonl" "$key" "$out" >"$out.chk" 2>&1 ||
            ins_problem "[$1] history $(printf '%s' "$key" | base64 -d | cat -v) differs from etcdctl watch --rev 1: $(head -c 1500 "$out.chk")"
    done

    # --time in the quiet gaps: the revision in effect then
    for i in "${INS_GAPS[@]}"; do
        read -r a rev <<<"$i"
        ins_check_get "time-$a" "$rev" "" --prefix --time "$a" -- "" --prefix
    done
    # diff --from-time --to-time: the first and the last quiet gap
    if [ ${#INS_GAPS[@]} -ge 2 ]; then
        local t1 r1 t2 r2
        read -r t1 r1 <<<"${INS_GAPS[0]}"
        read -r t2 r2 <<<"${INS_GAPS[-1]}"
        out=$WORK/chk/diff-$INS_STORE_LABEL-time
        ins_run diff "$out" diff --from-time "$t1" --to-time "$t2" -o json
        ectl_dump "$r1" "" --prefix && fa=$ECTL_OUT
        ectl_dump "$r2" "" --prefix
        [ "$INS_RC" = 0 ] && python3 "$INSPECT_CHECK" diff "$fa" "$ECTL_OUT" "$out" "$r1" "$r2" "$WORK/events.jsonl" >"$out.chk" 2>&1 ||
            ins_problem "[$1] diff --from-time $t1 --to-time $t2 (revisions $r1 $r2): exit $INS_RC $(head -c 1500 "$out.chk" 2>/dev/null) $(grep -m1 'level=error' "$out.err" | sed 's/.*msg=//') ($INS_CMD)"
    fi
    echo "[$1] ${#revs[@]} revisions, ${#pairs[@]} diffs, ${#hkeys[@]} histories, ${#INS_GAPS[@]} times checked"
}

# ins_collect_events: $WORK/events.jsonl, every event etcdctl watch --rev 1 replays.
ins_collect_events() {
    local last
    last=$(current_revision "$ETCD_EP")
    python3 "$INSPECT_CHECK" watch etcdctl --endpoints="$ETCD_EP" -- "$last" "$WORK/events.jsonl" ||
        fail "etcdctl watch --rev 1 did not replay up to $last"
}

# ins_wait_new_full SECONDS STORE...: until each store holds one more full snapshot than now. A
# scheduled full snapshot is skipped when nothing was written since the last one, so a key
# /tick is put every second of the wait (the number of those puts depends on timing).
ins_wait_new_full() {
    local secs=$1 s k ok
    shift
    local -A want=()
    for s in "$@"; do want[$s]=$(($(count_objects "$s" Full) + 1)); done
    for k in $(seq 1 $((secs * 10))); do
        ok=1
        for s in "$@"; do [ "$(count_objects "$s" Full)" -ge "${want[$s]}" ] || ok=0; done
        [ "$ok" = 0 ] || return 0
        if [ $((k % 10)) = 0 ]; then
            ins_log "put /tick (waiting for a full snapshot)"
            ectl put /tick "$k" >/dev/null
        fi
        sleep 0.1
    done
    for s in "$@"; do
        [ "$(count_objects "$s" Full)" -ge "${want[$s]}" ] || fail "no new full snapshot in $s within $secs s: $(ls "$s/v2" | tr '\n' ' ')"
    done
}
