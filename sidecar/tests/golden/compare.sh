#!/usr/bin/env bash
# The golden comparison: `sidecar analyze --json` and `sidecar dump` on the
# traces in this folder (four example workloads recorded with the probe, the
# known-answer traces, a synthetic trace written by gen_trace) must give the
# outputs in expected/ byte for byte (the Perfetto export by its digest). The
# reports hold no field that measures time spent, so nothing is masked.
# Recorded before the sidecar's restructuring (issue 30) with the build of
# that day. The synthetic trace is also analyzed with two workers and with
# two processes, which must give the one-worker output; four hosts' traces
# with one worker and two.
#
#   compare.sh SIDECAR GEN_TRACE           compare (exit 1 on a difference)
#   compare.sh SIDECAR GEN_TRACE --update  rewrite expected/ (a deliberate change)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
sidecar="$1" gen_trace="$2" mode="${3:-compare}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

"$gen_trace" "$out/synth.rlog" 1000000 4 zstd 2>/dev/null
"$gen_trace" "$out/synth-raw.rlog" 300000 3 none 2>/dev/null

run() { # NAME ARGS...: one output file per case
    local name="$1"; shift
    "$sidecar" "$@" >"$out/$name" 2>/dev/null
}
for t in wordcount bfs pagerank skew; do
    run "$t.jsonl" analyze "$here/$t.rlog" --window 50ms -q --json -
done
run skew.dump dump "$here/skew.rlog"
for t in "$here"/ka-*.rlog; do
    n="$(basename "$t" .rlog)"
    run "$n.jsonl" analyze "$t" --window 1us -q --json -
done
run synth.jsonl analyze "$out/synth.rlog" --window 50ms -q --json -
run synth-w2.jsonl analyze "$out/synth.rlog" --window 50ms -w 2 -q --json -
# Two workers without analysis threads: each window analyzed by whichever
# worker is free, not always its owner (the same reports). With the threads
# forced on: each worker's own.
SIDECAR_ANALYSIS=off run synth-w2-shared.jsonl analyze "$out/synth.rlog" --window 50ms -w 2 -q --json -
SIDECAR_ANALYSIS=on run synth-w2-threads.jsonl analyze "$out/synth.rlog" --window 50ms -w 2 -q --json -
run synth-raw.jsonl analyze "$out/synth-raw.rlog" --window 50ms -q --json -
# Four hosts, unsynchronized, one file each: each window names the other
# three whatever the workers (expected/hosts-w2.jsonl is hosts.jsonl).
for h in 1 2 3 4; do
    "$gen_trace" "$out/host$h.rlog" 100000 4 zstd all 0 0 1 "0x10$h" 2>/dev/null
done
run hosts.jsonl analyze "$out"/host?.rlog --window 50ms -q --json -
run hosts-w2.jsonl analyze "$out"/host?.rlog --window 50ms -w 2 -q --json -
# Two processes of a timely cluster on loopback (one worker each, the file
# read by both, each decoding the streams its worker owns): the same
# reports as one process (expected/synth-p2.jsonl is synth.jsonl).
port=$((20000 + RANDOM % 20000))
printf '127.0.0.1:%d\n127.0.0.1:%d\n' "$port" "$((port + 1))" >"$out/hosts.txt"
cluster=(--window 50ms -q --processes 2 --hostfile "$out/hosts.txt")
"$sidecar" analyze "$out/synth.rlog" "${cluster[@]}" --process 1 --json /dev/null >/dev/null 2>&1 &
second=$!
# (Into a file: timely prints "awaiting connections" on standard output
# while the other process starts.)
"$sidecar" analyze "$out/synth.rlog" "${cluster[@]}" --process 0 --json "$out/synth-p2.jsonl" >/dev/null 2>&1
wait "$second"
# The Perfetto export (the analysis's detail path), by its digest: the trace
# itself is a megabyte.
"$sidecar" analyze "$here/skew.rlog" "$here/pagerank.rlog" --window 50ms -q --perfetto "$out/trace.pftrace" 2>/dev/null
(cd "$out" && sha256sum trace.pftrace) >"$out/perfetto.sha256"

if [ "$mode" = --update ]; then
    rm -rf "$here/expected"; mkdir -p "$here/expected"
    cp "$out"/*.jsonl "$out"/*.dump "$out"/*.sha256 "$here/expected/"
    echo "golden: expected/ rewritten ($(ls "$here/expected" | wc -l) files)"
    exit 0
fi
fail=0
for e in "$here"/expected/*; do
    n="$(basename "$e")"
    if ! cmp -s "$e" "$out/$n"; then
        echo "golden: $n differs from expected:"
        diff <(tr ',' '\n' <"$e") <(tr ',' '\n' <"$out/$n") | head -20 || true
        fail=1
    fi
done
[ "$fail" = 0 ] && echo "golden: $(ls "$here/expected" | wc -l) outputs identical"
exit "$fail"
