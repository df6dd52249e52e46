#!/usr/bin/env bash
# deploy/systemd: the unit's ExecStart, with its example environment file and config, runs as
# systemd would run it (EnvironmentFile lines NAME=value, unbraced $VAR split into words): the
# member's data dir is initialized, etcd starts as the child, a full snapshot and deltas reach
# the store named in the config, SIGTERM (the unit's KillSignal) stops both with exit 0 within
# TimeoutStopSec, and a restore of the store equals the keyspace. Only the machine paths of the
# examples (/var/lib/etcd, /etc/etcdbr, /usr/local/bin, the ports, the S3 store) are replaced.
source "$(dirname "$0")/lib.sh"
make_workdir
D=$ETCDBR_SOURCE_DIR/deploy/systemd
CPORT=$(free_port)
PPORT=$(free_port)
SPORT=$(free_port)
STATE=$WORK/state
mkdir -p "$STATE"

# the examples, with this machine's paths and ports
sed -e "s|/var/lib/etcd|$STATE|g" -e "s|127.0.0.1:2379|127.0.0.1:$CPORT|g" \
    -e "s|127.0.0.1:2380|127.0.0.1:$PPORT|g" -e "s|--server-port=8080|--server-port=$SPORT|" \
    -e "s|^AWS_APPLICATION_CREDENTIALS_JSON=.*||" "$D/etcdbr.env" >"$WORK/etcdbr.env"
sed -e "s|provider: S3|provider: Local|" -e "s|container: etcd-backups|container: $WORK/store|" \
    -e "s|deltaSnapshotPeriod: 20s|deltaSnapshotPeriod: 1s|" "$D/etcdbr.yaml" >"$WORK/etcdbr.yaml"
grep -q "^ExecStart=/usr/local/bin/etcdbrctl run " "$D/etcdbr.service" || fail "unexpected ExecStart"
exec_start=$(sed -n 's/^ExecStart=//p' "$D/etcdbr.service")
stop_secs=$(sed -n 's/^TimeoutStopSec=//p' "$D/etcdbr.service")
[ "$(sed -n 's/^KillSignal=//p' "$D/etcdbr.service")" = SIGTERM ] || fail "KillSignal is not SIGTERM"

# EnvironmentFile: NAME=value per line, comments and blank lines skipped, no expansion
declare -A ENVF=()
while IFS= read -r line; do
    case "$line" in '' | '#'*) continue ;; esac
    ENVF[${line%%=*}]=${line#*=}
done <"$WORK/etcdbr.env"
[ -n "${ENVF[ETCDBR_FLAGS]:-}" ] && [ -n "${ENVF[ETCD_FLAGS]:-}" ] || fail "the env file lacks ETCDBR_FLAGS or ETCD_FLAGS"

# ExecStart: words; an unbraced $NAME becomes the words of its value
argv=()
read -r -a words <<<"$exec_start"
for w in "${words[@]}"; do
    case "$w" in
    '$'*) read -r -a vw <<<"${ENVF[${w#\$}]}" && argv+=("${vw[@]}") ;;
    /usr/local/bin/etcdbrctl) argv+=("$ETCDBR_BIN") ;;
    /usr/local/bin/etcd) argv+=("$(command -v etcd)") ;;
    --config-file=/etc/etcdbr/etcdbr.yaml) argv+=("--config-file=$WORK/etcdbr.yaml") ;;
    *) argv+=("$w") ;;
    esac
done
echo "ExecStart as systemd runs it here: ${argv[*]}"
(cd "$STATE" && umask 077 && exec "${argv[@]}") >"$WORK/unit.log" 2>&1 &
UNIT_PID=$!
PIDS+=("$UNIT_PID")
ETCD_EP=http://127.0.0.1:$CPORT
wait_for_log "$WORK/unit.log" "full snapshot Full-" 60
for i in $(seq 1 30); do ectl put "/vm/k$i" "v$i" >/dev/null; done
curl -sf "http://127.0.0.1:$SPORT/healthz" >/dev/null || fail "/healthz on the unit's --server-port is not 200"
src_rev=$(current_revision "$ETCD_EP")
dump_keys "$ETCD_EP" >"$WORK/src.jsonl"
t0=$SECONDS
kill -TERM "$UNIT_PID"
rc=0
wait "$UNIT_PID" || rc=$?
[ "$rc" = 0 ] || fail "the unit's process exited $rc on SIGTERM"
[ $((SECONDS - t0)) -lt "${stop_secs%s}" ] || fail "stopping took longer than TimeoutStopSec"
pgrep -f "$STATE/vm1.etcd" >/dev/null && fail "etcd still running after SIGTERM"
[ -d "$STATE/vm1.etcd/member" ] || fail "the data dir is not where ETCD_FLAGS put it"
ls "$WORK/store/vm1/v2" | grep '^Full-' >/dev/null || fail "no full snapshot under the config's container and prefix"
"$ETCDBR_BIN" restore --storage-provider=Local --store-container="$WORK/store" --store-prefix=vm1 \
    --data-dir="$WORK/restored.etcd" --restoration-temp-snapshots-dir="$WORK/restore.tmp" \
    >"$WORK/restore.log" 2>&1 || { tail "$WORK/restore.log"; fail "restore failed"; }
start_etcd r "$WORK/restored.etcd"
[ "$(current_revision "$ETCD_EP")" = "$src_rev" ] || fail "restored revision differs from $src_rev"
dump_keys "$ETCD_EP" | cmp - "$WORK/src.jsonl" || fail "restored keyspace differs"
echo "systemd unit: ExecStart with the example env and config backs up, stops cleanly on SIGTERM in $((SECONDS - t0)) s, restores exactly at $src_rev"
