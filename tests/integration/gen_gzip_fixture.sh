#!/usr/bin/env bash
# Writes the fixture tests/fixtures/etcdbr-gzip-parallel (see its README.md): a store written by
# our etcdbrctl with --compression-policy=gzip --gzip-mode=parallel from a real etcd, a full
# snapshot of ~3 MiB (several 1 MiB gzip members) and deltas. Not a test; run it by hand:
#   ETCDBR_BIN=build/etcdbrctl tests/integration/gen_gzip_fixture.sh OUT_DIR [SEED]
source "$(dirname "$0")/lib.sh"
OUT=$1
SEED=${2:-9}
[ ! -e "$OUT" ] || fail "$OUT exists"
make_workdir
echo "seed $SEED"
start_etcd src "$WORK/src.etcd"
# ~3 MiB of compressible JSON-like values (as Kubernetes objects are) that are deleted again
# before the full snapshot: the db keeps their revisions (no compaction), so the full snapshot
# is several 1 MiB gzip members while expected/keys.jsonl stays small
python3 - "$SEED" "$WORK/load" <<'PY'
import random, sys
rnd = random.Random(int(sys.argv[1]))
words = ["metadata", "namespace", "kube-system", "labels", "app", "nginx", "image", "ports",
         "containerPort", "resources", "limits", "memory", "cpu", "status", "Running", "uid"]
template = ",".join("%s:%s" % (words[k % 16], words[(k * 7) % 16]) for k in range(80))
def value(i, n):
    # no spaces or quotes: etcdctl txn splits and unquotes its lines
    extra = ",".join("%s:%d" % (rnd.choice(words), rnd.randrange(1000)) for _ in range(n))
    return "{id:%d,%s,%s}" % (i, extra, template)
for t in range(13):
    with open("%s.%02d" % (sys.argv[2], t), "w") as f:
        f.write("\n")
        for j in range(128 if t < 12 else 100):
            i = t * 128 + j
            if t < 12:
                f.write("put /registry/tmp/ns%d/obj-%05d %s\n" % (i % 9, i, value(i, 4)))
            else:
                f.write("put /registry/pods/ns%d/pod-%05d %s\n" % (j % 9, j, value(j, 2)[:400]))
        f.write("\n\n")
PY
for f in "$WORK"/load.*; do ectl txn <"$f" >/dev/null; done
ectl del --prefix /registry/tmp/ >/dev/null
ectl endpoint status -w table
[ "$(current_revision "$ETCD_EP")" = 15 ] || fail "the load did not go in (revision $(current_revision "$ETCD_EP"))"
mkdir -p "$OUT/store" "$OUT/expected"
start_snapshotter "$OUT/store" "$WORK/snap.log" --compression-policy=gzip --gzip-mode=parallel \
    --gzip-threads=2 --delta-snapshot-period=1s
wait_for_log "$WORK/snap.log" "full snapshot .* stored" 60
for round in 1 2 3 4; do
    for i in $(seq 1 20); do ectl put "/registry/events/r$round-$i" "event $round $i $RANDOM" >/dev/null; done
    ectl put "/registry/pods/ns1/pod-00010" "overwritten in round $round" >/dev/null
    ectl del "/registry/pods/ns$round/pod-0000$round" >/dev/null || true
    [ "$round" != 3 ] || ectl del --prefix "/registry/events/r1-1" >/dev/null
    sleep 1.5
done
rev=$(current_revision "$ETCD_EP")
for i in $(seq 1 100); do
    last=$(ls "$OUT/store/v2" | sed -n 's/^Incr-[0-9]*-\([0-9]*\)-.*/\1/p' | sort -n | tail -1)
    [ "$((10#${last:-0}))" -ge "$rev" ] && break
    sleep 0.2
done
[ "$((10#${last:-0}))" -ge "$rev" ] || fail "deltas do not reach revision $rev"
stop_snapshotter
dump_keys "$ETCD_EP" >"$OUT/expected/keys.jsonl"
echo "$rev" >"$OUT/expected/revision"
ls -l "$OUT/store/v2"
du -sh "$OUT"
