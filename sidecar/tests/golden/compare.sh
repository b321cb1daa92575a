#!/usr/bin/env bash
# The golden comparison: `sidecar analyze --json` and `sidecar dump` on the
# traces in this folder (four example workloads recorded with the probe, the
# known-answer traces, a synthetic trace written by gen_trace) must give the
# outputs in expected/ byte for byte (the Perfetto export by its digest). The
# reports hold no field that measures time spent, so nothing is masked.
# Recorded before the sidecar's restructuring (issue 30) with the build of
# that day. The synthetic trace is also analyzed with two workers and with
# two processes, which must give the one-worker output; four hosts' traces
# with one worker and two; the recorded programs with two workers and two
# processes, and the known-answer traces with two workers, each checked
# against its own one-worker run.
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
two_processes() { # NAME WINDOW TRACE: process 0's reports into $out/NAME
    local port=$((20000 + RANDOM % 20000))
    printf '127.0.0.1:%d\n127.0.0.1:%d\n' "$port" "$((port + 1))" >"$out/hosts.txt"
    local cluster=(--window "$2" -q --processes 2 --hostfile "$out/hosts.txt")
    "$sidecar" analyze "$3" "${cluster[@]}" --process 1 --json /dev/null >/dev/null 2>&1 &
    local second=$!
    # (Into a file, not standard output, which the cluster's start could
    # write to.)
    "$sidecar" analyze "$3" "${cluster[@]}" --process 0 --json "$out/$1" >/dev/null 2>&1
    wait "$second"
}
two_processes synth-p2.jsonl 50ms "$out/synth.rlog"
# The recorded programs and the known-answer traces again with two workers
# (with the analysis threads on too), and the programs as two processes:
# each must give its one-worker reports, checked against this run's (not
# stored twice).
same=()
for t in wordcount bfs pagerank skew; do
    run "$t-w2.out" analyze "$here/$t.rlog" --window 50ms -w 2 -q --json -
    SIDECAR_ANALYSIS=on run "$t-w2-threads.out" analyze "$here/$t.rlog" --window 50ms -w 2 -q --json -
    two_processes "$t-p2.out" 50ms "$here/$t.rlog"
    same+=("$t.jsonl:$t-w2.out" "$t.jsonl:$t-w2-threads.out" "$t.jsonl:$t-p2.out")
done
for t in "$here"/ka-*.rlog; do
    n="$(basename "$t" .rlog)"
    run "$n-w2.out" analyze "$t" --window 1us -w 2 -q --json -
    same+=("$n.jsonl:$n-w2.out")
done
fail=0
for pair in "${same[@]}"; do
    base="${pair%%:*}" other="${pair#*:}"
    if ! cmp -s "$out/$base" "$out/$other"; then
        echo "golden: $other differs from $base, its one-worker run:"
        diff <(tr ',' '\n' <"$out/$base") <(tr ',' '\n' <"$out/$other") | head -20 || true
        fail=1
    fi
done
# The Perfetto export (the analysis's detail path), by its digest: the trace
# itself is a megabyte.
"$sidecar" analyze "$here/skew.rlog" "$here/pagerank.rlog" --window 50ms -q --perfetto "$out/trace.pftrace" 2>/dev/null
(cd "$out" && sha256sum trace.pftrace) >"$out/perfetto.sha256"

if [ "$mode" = --update ]; then
    # (Never recorded while the runs of one trace disagree.)
    [ "$fail" = 0 ] || exit 1
    rm -rf "$here/expected"; mkdir -p "$here/expected"
    cp "$out"/*.jsonl "$out"/*.dump "$out"/*.sha256 "$here/expected/"
    echo "golden: expected/ rewritten ($(ls "$here/expected" | wc -l) files)"
    exit 0
fi
for e in "$here"/expected/*; do
    n="$(basename "$e")"
    if ! cmp -s "$e" "$out/$n"; then
        echo "golden: $n differs from expected:"
        diff <(tr ',' '\n' <"$e") <(tr ',' '\n' <"$out/$n") | head -20 || true
        fail=1
    fi
done
[ "$fail" = 0 ] && echo "golden: $(ls "$here/expected" | wc -l) outputs identical, ${#same[@]} runs with more workers or processes as with one"
exit "$fail"
