#!/usr/bin/env python3
"""inspect_check.py: compares `etcdbrctl get/diff/history -o json` with what etcdctl says on the
live cluster (docs/inspect.md). Integers are Python's, so 64-bit lease IDs compare exactly (jq 1.6
would round them through a double). Every subcommand prints what differs and exits 1, or exits 0.

  get ETCDCTL_JSON ETCDBR_JSON REV [--no-lease]
      the kvs, count and more exactly; header.revision == REV (etcdctl's header is the live
      cluster's current revision, and its cluster_id, member_id and raft_term are not in ours).
  diff ETCDCTL_A_JSON ETCDCTL_B_JSON ETCDBR_DIFF_JSON A B [EVENTS_JSONL]
      the keys listed are exactly those whose kv differs between the two dumps (a rewrite with the
      same value is a new mod revision: "changed"); change, from, to as the dumps say; with the
      events log, `events` (puts and deletes of the key in (A, B]) and `deleted_revision`.
  history EVENTS_JSONL KEY_B64 ETCDBR_HISTORY_JSON
      every event of the key as `etcdctl watch --rev 1` replays it: type, revision, and for a put
      create_revision, version, lease, value size.
  keyspace KEYS_JSONL ETCDBR_JSON REV
      a fixture's expected/keys.jsonl (lease left out) equals the kvs of a get (lease dropped).
  watch ETCDCTL... -- LAST_REV OUT_JSONL
      runs `ETCDCTL... watch --rev 1 --prefix "" -w json` until an event at LAST_REV arrives and
      writes one line per event: {"type","revision","key","create_revision","version","lease",
      "value_size"} (30 s at most).
"""
import base64
import json
import os
import select
import signal
import subprocess
import sys
import time

PROBLEMS = []


def problem(msg):
    PROBLEMS.append(msg)


def load(path):
    with open(path) as f:
        text = f.read()
    try:
        return json.loads(text)
    except ValueError as e:
        sys.exit("%s: not JSON (%s): %r" % (path, e, text[:300]))


def kv_map(dump):
    out = {}
    for kv in dump.get("kvs") or []:
        out[kv["key"]] = kv
    return out


def show_key(k):
    try:
        return repr(base64.b64decode(k).decode())
    except (UnicodeDecodeError, ValueError):
        return k


def cmd_get(ectl_path, ours_path, rev, *opts):
    ectl, ours = load(ectl_path), load(ours_path)
    if "--no-lease" in opts:
        # etcd 3.7 leaves the lease out of a --keys-only answer (3.4-3.6 keep it): compare without
        for kv in ours.get("kvs") or []:
            kv.pop("lease", None)
    rev = int(rev)
    if ours.get("header") != {"revision": rev}:
        problem("header %r, want {'revision': %d}" % (ours.get("header"), rev))
    for field in ("count", "more"):
        if ectl.get(field) != ours.get(field):
            problem("%s: etcdctl %r, etcdbrctl %r" % (field, ectl.get(field), ours.get(field)))
    extra = set(ours) - {"header", "kvs", "count", "more"}
    if extra:
        problem("fields etcdctl does not print: %s" % sorted(extra))
    a, b = ectl.get("kvs") or [], ours.get("kvs") or []
    if [kv["key"] for kv in a] != [kv["key"] for kv in b]:
        ka, kb = [kv["key"] for kv in a], [kv["key"] for kv in b]
        problem("keys differ: only etcdctl %s; only etcdbrctl %s; order equal: %s" % (
            [show_key(k) for k in ka if k not in kb][:10],
            [show_key(k) for k in kb if k not in ka][:10], sorted(ka) == sorted(kb)))
    for x, y in zip(a, b):
        if x != y:
            problem("kv %s: etcdctl %s, etcdbrctl %s" % (show_key(x["key"]), short(x), short(y)))


def short(kv):
    kv = dict(kv)
    if "value" in kv and len(kv["value"]) > 40:
        kv["value"] = kv["value"][:40] + "...(%d b64 chars)" % len(kv["value"])
    return json.dumps(kv, sort_keys=True)


def state(kv):
    """A kv of a get dump as diff's from/to object."""
    s = {"create_revision": kv.get("create_revision", 0), "mod_revision": kv.get("mod_revision", 0),
         "version": kv.get("version", 0), "lease": kv.get("lease", 0),
         "value_size": len(base64.b64decode(kv.get("value", "")))}
    return s


def full_state(st):
    """diff's from/to object with absent fields as 0: get leaves out zero fields, diff prints a
    zero lease (docs/inspect.md does not say which for diff), so either form is accepted."""
    if st is None:
        return None
    return {k: st.get(k, 0) for k in ("create_revision", "mod_revision", "version", "lease",
                                      "value_size")} if set(st) <= {
        "create_revision", "mod_revision", "version", "lease", "value_size"} else st


def read_events(path):
    ev = []
    with open(path) as f:
        for line in f:
            if line.strip():
                ev.append(json.loads(line))
    return ev


def cmd_diff(a_path, b_path, ours_path, a_rev, b_rev, events_path=None):
    A, B, ours = kv_map(load(a_path)), kv_map(load(b_path)), load(ours_path)
    a_rev, b_rev = int(a_rev), int(b_rev)
    if ours.get("from_revision") != a_rev or ours.get("to_revision") != b_rev:
        problem("from/to revision %r/%r, want %d/%d" % (ours.get("from_revision"),
                                                         ours.get("to_revision"), a_rev, b_rev))
    want = {}
    for k in set(A) | set(B):
        if A.get(k) != B.get(k):
            want[k] = "created" if k not in A else "deleted" if k not in B else "changed"
    got = {}
    keys_in_order = []
    for c in ours.get("changes") or []:
        got[c["key"]] = c
        keys_in_order.append(base64.b64decode(c["key"]))
    if keys_in_order != sorted(keys_in_order):
        problem("changes not in key order")
    for k in sorted(set(want) - set(got)):
        problem("key %s differs between the dumps (%s) but is not listed" % (show_key(k), want[k]))
    for k in sorted(set(got) - set(want)):
        problem("key %s listed (%s) but equal in both dumps" % (show_key(k), got[k].get("change")))
    evs = read_events(events_path) if events_path else None
    for k in sorted(set(got) & set(want)):
        c = got[k]
        if c.get("change") != want[k]:
            problem("key %s: change %r, want %r" % (show_key(k), c.get("change"), want[k]))
        for side, dump in (("from", A), ("to", B)):
            w = state(dump[k]) if k in dump else None
            if full_state(c.get(side)) != w:
                problem("key %s: %s %r, the dump says %r" % (show_key(k), side, c.get(side), w))
        if evs is not None:
            mine = [e for e in evs if e["key"] == k and a_rev < e["revision"] <= b_rev]
            if c.get("events") != len(mine):
                problem("key %s: events %r, the watch replays %d in (%d, %d]" % (
                    show_key(k), c.get("events"), len(mine), a_rev, b_rev))
            if want[k] == "deleted":
                dels = [e["revision"] for e in mine if e["type"] == "DELETE"]
                if c.get("deleted_revision") != (dels[-1] if dels else None):
                    problem("key %s: deleted_revision %r, the watch says %r" % (
                        show_key(k), c.get("deleted_revision"), dels[-1] if dels else None))
            elif "deleted_revision" in c:
                problem("key %s: deleted_revision on a %s key" % (show_key(k), want[k]))


def cmd_history(events_path, key, ours_path):
    ours = load(ours_path)
    if ours.get("key") != key:
        problem("key %r, want %r" % (ours.get("key"), key))
    want = [e for e in read_events(events_path) if e["key"] == key]
    got = ours.get("events") or []
    fields = ("type", "revision", "create_revision", "version", "lease", "value_size")
    norm_got = [{f: e.get(f, 0) for f in fields} for e in got]
    norm_want = [{f: e.get(f, 0) for f in fields} for e in want]
    for e in got:
        if not e.get("object"):
            problem("event at %r names no object" % e.get("revision"))
    if norm_got != norm_want:
        gr, wr = [e["revision"] for e in norm_got], [e["revision"] for e in norm_want]
        problem("key %s: %d events, the watch replays %d; revisions only ours %s, only the watch's"
                " %s" % (show_key(key), len(got), len(want), sorted(set(gr) - set(wr))[:10],
                          sorted(set(wr) - set(gr))[:10]))
        for x, y in zip(norm_got, norm_want):
            if x != y:
                problem("first difference: etcdbrctl %s, watch %s" % (json.dumps(x), json.dumps(y)))
                break


def cmd_keyspace(keys_path, ours_path, rev):
    ours = load(ours_path)
    if ours.get("header") != {"revision": int(rev)}:
        problem("header %r, want revision %s" % (ours.get("header"), rev))
    want = [json.loads(line) for line in open(keys_path) if line.strip()]
    got = []
    for kv in ours.get("kvs") or []:
        got.append({"key": kv["key"], "value": kv.get("value", ""),
                    "create_revision": kv.get("create_revision", 0),
                    "mod_revision": kv.get("mod_revision", 0), "version": kv.get("version", 0)})
    if ours.get("count", 0) != len(want):
        problem("count %r, expected %d keys" % (ours.get("count"), len(want)))
    if got != want:
        gk, wk = {kv["key"] for kv in got}, {kv["key"] for kv in want}
        problem("%d kvs, expected %d; keys only ours %s, only expected %s" % (
            len(got), len(want), [show_key(k) for k in sorted(gk - wk)][:5],
            [show_key(k) for k in sorted(wk - gk)][:5]))
        for x, y in zip(got, want):
            if x != y:
                problem("first difference: etcdbrctl %s, expected %s" % (short(x), short(y)))
                break


def cmd_watch(argv):
    cut = argv.index("--")
    ectl, (last, out_path) = argv[:cut], argv[cut + 1:]
    last = int(last)
    p = subprocess.Popen(ectl + ["watch", "--rev", "1", "--prefix", "", "-w", "json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    buf, seen, events = b"", 0, []
    deadline = time.time() + 30
    try:
        while seen < last:
            if time.time() > deadline:
                sys.exit("watch: no event at revision %d within 30 s (last %d)" % (last, seen))
            r, _, _ = select.select([p.stdout], [], [], 1.0)
            if not r:
                continue
            chunk = os.read(p.stdout.fileno(), 1 << 20)
            if not chunk:
                sys.exit("watch ended: %s" % p.stderr.read().decode(errors="replace")[:500])
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if not line.strip():
                    continue
                resp = json.loads(line)
                for e in resp.get("Events") or []:
                    kv = e["kv"]
                    put = e.get("type", 0) in (0, "PUT")
                    ev = {"type": "PUT" if put else "DELETE", "revision": kv["mod_revision"],
                          "key": kv["key"]}
                    if put:
                        ev.update(create_revision=kv.get("create_revision", 0),
                                  version=kv.get("version", 0), lease=kv.get("lease", 0),
                                  value_size=len(base64.b64decode(kv.get("value", ""))))
                    events.append(ev)
                    seen = max(seen, ev["revision"])
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait()
    with open(out_path, "w") as f:
        for ev in events:
            f.write(json.dumps(ev) + "\n")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "watch":
        cmd_watch(args)
        return
    {"get": cmd_get, "diff": cmd_diff, "history": cmd_history, "keyspace": cmd_keyspace}[cmd](*args)
    if PROBLEMS:
        for p in PROBLEMS[:20]:
            print("  " + p)
        if len(PROBLEMS) > 20:
            print("  ... %d more" % (len(PROBLEMS) - 20))
        sys.exit(1)


if __name__ == "__main__":
    main()
