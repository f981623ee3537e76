#!/usr/bin/env bash
# Issue 12's measurement: pnp-lifecycle against the peers of ../shared/peers (statig-fsm,
# naive-std) on the same reset cycle, all three in one run, printed as one table; on a bare
# clone (no ../shared/peers) the same run without the peers' rows (SKIPPED lines say so).
#
#   instructions per cycle: callgrind, (Ir(101 rounds) - Ir(1 round)) / 100, release build
#   wall: the median of REPS interleaved runs (ns a cycle, timed inside the binary)
#   pnpw: the same cycle, each answer given with its callback's return (one input, not two)
#   plus: query stop + cancel stop, 64 slots with one client vs 1 slot, size_of figures,
#   and the firmware figures (thumbv7em-none-eabihf, compare/firmware's release profile:
#   opt-level "z", fat LTO; 1 device, 4 clients, 1 port): the core's .text and its RAM.
#
# Usage: bash compare/run.sh            (REPS=7 by default; COMPARE_PROFILE=1 adds a
#        callgrind_annotate of pnp's cycle at 16 clients)
# A missing tool gives a printed SKIPPED line, never a silent gap.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
skip() { printf 'SKIPPED: %s\n' "$*"; }

REPS="${REPS:-7}"
CLIENTS=(1 4 16 64)
IMPLS=(statig naive pnp pnp-pt pnpw pnpw-pt)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# On a bare clone (no ../shared/peers) only the peers' rows are skipped: pnp's own cycle
# figures, the sizes, the hot path's bracket and the firmware figures need no peer.
have_peers=1
if [ ! -d ../shared/peers/statig-fsm ] || [ ! -d ../shared/peers/naive-std ]; then
  have_peers=0
  IMPLS=(pnp pnp-pt pnpw pnpw-pt)
fi

cargo build -q --release -p pnp-compare
BIN=target/release/pnp-compare

# --- instructions (callgrind) ------------------------------------------------------------
# ir IMPL N ROUNDS: instructions of one whole run.
ir() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$BIN" "$@" 2>&1 >/dev/null |
    grep -o 'Collected : [0-9]*' | grep -o '[0-9]*$'
}
# per IMPL N: instructions of one round.
per() { local a b; a=$(ir "$1" "$2" 1); b=$(ir "$1" "$2" 101); echo $(((b - a) / 100)); }

declare -A INS WALL
have_valgrind=0
if command -v valgrind >/dev/null 2>&1; then
  have_valgrind=1
  for n in "${CLIENTS[@]}"; do
    for imp in "${IMPLS[@]}"; do INS[$imp,$n]=$(per "$imp" "$n"); done
  done
  INS[qs]=$(per qs 0)
  INS[slots64]=$(per slots64 1)
else
  skip "instruction counts: valgrind is not installed (apt-get install valgrind); wall medians only"
fi

# --- wall clock: REPS interleaved runs, the median ---------------------------------------
# Rounds so that each run takes about 0.1 s; the timer is read inside the binary.
rounds() { echo $((800000 / $1)); }
ns() { "$BIN" "$@" | grep -o 'ns_per_round=[0-9.]*' | cut -d= -f2; }
for ((rep = 0; rep < REPS; rep++)); do
  for n in "${CLIENTS[@]}"; do
    for imp in "${IMPLS[@]}"; do ns "$imp" "$n" "$(rounds "$n")" >>"$tmp/wall.$imp.$n"; done
  done
  ns qs 0 2000000 >>"$tmp/wall.qs"
  ns slots64 1 800000 >>"$tmp/wall.slots64"
done
median() { sort -g "$1" | awk '{v[NR] = $1} END {m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.0f", m}'; }
for n in "${CLIENTS[@]}"; do
  for imp in "${IMPLS[@]}"; do WALL[$imp,$n]=$(median "$tmp/wall.$imp.$n"); done
done
WALL[qs]=$(median "$tmp/wall.qs")
WALL[slots64]=$(median "$tmp/wall.slots64")
if [ $have_peers = 0 ]; then # the peers' cells print as "-"
  for n in "${CLIENTS[@]}"; do for imp in statig naive; do INS[$imp,$n]=-; WALL[$imp,$n]=-; done; done
fi

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "-" }'; }
num() { case "${1:-}" in '' | *[!0-9]*) printf -- "-" ;; *) printf "%'d" "$1" ;; esac; }

printf '\n## pnp-lifecycle vs the peers: one reset cycle (client 0 requests, every client acks,\n'
printf '## hardware reset done, every client reacquires); pnp with its whole owner contract\n\n'
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(rustc --version), release build"
[ $have_peers = 1 ] ||
  skip "the peers' columns (statig, naive, pnp/statig): ../shared/peers (statig-fsm, naive-std) is not beside the repository"
if [ $have_valgrind = 1 ]; then
  echo "instructions: callgrind, (Ir(101 rounds) - Ir(1 round)) / 100;" \
    "wall: median of $REPS interleaved runs, ns a cycle"
  echo
  echo "pnp+poll: the owner also asks poll_timeout after every drain (the README's owner loop);"
  echo "pnpw: each client's answer given with its callback's return (Input::CallbackDoneWith:"
  echo "RESET with ResetExecute, RESET_END with AcquireInterface), one input instead of two"
  echo "(target: pnpw and pnpw+poll <= 0.7x statig at 16 and 64 clients)"
  echo
  echo "| clients | statig | naive | pnp | pnp/statig | pnp+poll | pnp+poll/statig | pnpw | pnpw/statig | pnpw+poll | pnpw+poll/statig | wall statig | wall naive | wall pnp | wall pnp/statig | wall pnp+poll | wall pnpw | wall pnpw/statig |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  for n in "${CLIENTS[@]}"; do
    echo "| $n | $(num "${INS[statig,$n]}") | $(num "${INS[naive,$n]}") | $(num "${INS[pnp,$n]}")" \
      "| $(ratio "${INS[pnp,$n]}" "${INS[statig,$n]}") | $(num "${INS[pnp-pt,$n]}")" \
      "| $(ratio "${INS[pnp-pt,$n]}" "${INS[statig,$n]}") | $(num "${INS[pnpw,$n]}")" \
      "| $(ratio "${INS[pnpw,$n]}" "${INS[statig,$n]}") | $(num "${INS[pnpw-pt,$n]}")" \
      "| $(ratio "${INS[pnpw-pt,$n]}" "${INS[statig,$n]}") | ${WALL[statig,$n]} ns | ${WALL[naive,$n]} ns" \
      "| ${WALL[pnp,$n]} ns | $(ratio "${WALL[pnp,$n]}" "${WALL[statig,$n]}") | ${WALL[pnp-pt,$n]} ns" \
      "| ${WALL[pnpw,$n]} ns | $(ratio "${WALL[pnpw,$n]}" "${WALL[statig,$n]}") |"
  done
  echo
  echo "query stop + cancel stop (pnp, outputs drained): ${INS[qs]} instructions, ${WALL[qs]} ns (target <= 120 instructions)"
  echo "64 slots, 1 client: ${INS[slots64]} instructions vs 1 slot, 1 client: ${INS[pnp,1]}" \
    "-> $(ratio "${INS[slots64]}" "${INS[pnp,1]}")x (wall ${WALL[slots64]} ns vs ${WALL[pnp,1]} ns; target <= 1.3x)"
else
  echo "wall: median of $REPS interleaved runs, ns a cycle"
  echo
  echo "| clients | wall statig | wall naive | wall pnp | wall pnp/statig | wall pnp+poll | wall pnpw | wall pnpw+poll |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
  for n in "${CLIENTS[@]}"; do
    echo "| $n | ${WALL[statig,$n]} ns | ${WALL[naive,$n]} ns | ${WALL[pnp,$n]} ns" \
      "| $(ratio "${WALL[pnp,$n]}" "${WALL[statig,$n]}") | ${WALL[pnp-pt,$n]} ns | ${WALL[pnpw,$n]} ns | ${WALL[pnpw-pt,$n]} ns |"
  done
  echo
  echo "query stop + cancel stop (pnp): ${WALL[qs]} ns; 64 slots, 1 client: ${WALL[slots64]} ns vs 1 slot: ${WALL[pnp,1]} ns"
fi
echo
echo "size_of (this host):"
"$BIN" sizes | sed 's/^size_of /  /'

# --- the hot path: one client hardware-operation bracket (begin + end) --------------------
# src/bin/bracket.rs. Instructions: callgrind, (Ir(100,001 rounds) - Ir(1 round)) / 100,000
# (the runtime: 10,001 and 1, / 10,000); system calls: strace -c -f over ROUNDS brackets;
# wall: median of REPS runs at 1 thread, and at 2 threads on 2 clients.
BR=target/release/bracket
bir() { # bir IMPL ROUNDS: instructions of one whole run
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$BR" "$1" "$2" 2>&1 >/dev/null |
    grep -o 'Collected : [0-9]*' | grep -o '[0-9]*$'
}
bper() { local a b; a=$(bir "$1" 1); b=$(bir "$1" $(($2 + 1))); echo $(((b - a) / $2)); }
bsys() { # bsys IMPL ROUNDS: system calls per bracket (all kinds), from strace -c -f
  local total
  total=$(strace -f -c -o "$tmp/strace.$1" "$BR" "$1" "$2" >/dev/null 2>&1 &&
    awk '$NF == "total" {print $(NF-2)}' "$tmp/strace.$1")
  local base
  base=$(strace -f -c -o "$tmp/strace0.$1" "$BR" "$1" 1 >/dev/null 2>&1 &&
    awk '$NF == "total" {print $(NF-2)}' "$tmp/strace0.$1")
  awk -v t="${total:-0}" -v b="${base:-0}" -v n="$2" 'BEGIN { v = (t - b) / n; if (v < 0) v = 0; printf "%.2f", v }'
}
cargo build -q --release -p pnp-compare --bin bracket
# The fast path's row next to the remove lock's.
BIMPLS=(atomic fast lookup gate mutex core runtime)
declare -A BROUNDS=([atomic]=20000000 [mutex]=5000000 [core]=1000000 [runtime]=100000 [fast]=20000000 [lookup]=20000000 [gate]=20000000)
declare -A BINS BSYS BW1 BW2
for imp in "${BIMPLS[@]}"; do
  for ((rep = 0; rep < REPS; rep++)); do
    "$BR" "$imp" "${BROUNDS[$imp]}" 1 | grep -o 'ns_per_bracket=[0-9.]*' | cut -d= -f2 >>"$tmp/bw1.$imp"
    if [ "$imp" != core ]; then
      "$BR" "$imp" "${BROUNDS[$imp]}" 2 | grep -o 'ns_per_bracket=[0-9.]*' | cut -d= -f2 >>"$tmp/bw2.$imp"
    fi
  done
  BW1[$imp]=$(median "$tmp/bw1.$imp")
  BW2[$imp]=$( [ -s "$tmp/bw2.$imp" ] && median "$tmp/bw2.$imp" || echo "-")
  if [ $have_valgrind = 1 ]; then
    if [ "$imp" = runtime ]; then BINS[$imp]=$(bper "$imp" 10000); else BINS[$imp]=$(bper "$imp" 100000); fi
  else
    BINS[$imp]="-"
  fi
  if command -v strace >/dev/null 2>&1; then BSYS[$imp]=$(bsys "$imp" 10000); else BSYS[$imp]="-"; fi
done
printf '\n## the hot path: one client hardware-operation bracket (begin + end), one device, 16 slots\n\n'
command -v strace >/dev/null 2>&1 || skip "system calls per bracket: strace is not installed (apt-get install strace)"
[ $have_valgrind = 1 ] || skip "instructions per bracket: valgrind is not installed"
echo "| bracket | instructions | system calls | wall, 1 thread | wall, 2 threads on 2 clients | wall 2/1 |"
echo "|---|---:|---:|---:|---:|---:|"
bname() { case "$1" in
  atomic) echo "AtomicUsize inc + dec (a remove lock)" ;;
  mutex) echo "std Mutex lock + unlock, twice" ;;
  core) echo "the core alone (Access + AccessDone, drained)" ;;
  runtime) echo "the runtime, slow path (with(operation_begin) + with(operation_done))" ;;
  fast) echo "the runtime, fast path as a port calls it (operation_begin_on + operation_end_on, its ClientGate, gate open)" ;;
  lookup) echo "the runtime, fast path by client handle (operation_begin + operation_end, gate looked up)" ;;
  gate) echo "the fast path's gate alone (Gate::begin + Gate::end)" ;;
  esac; }
for imp in "${BIMPLS[@]}"; do
  if [ "${BW2[$imp]}" = - ]; then w2="- (one \`&mut\` machine)"; r2="-"; else
    w2="${BW2[$imp]} ns"; r2=$(ratio "${BW2[$imp]}" "${BW1[$imp]}"); fi
  echo "| $(bname "$imp") | $(num "${BINS[$imp]}") | ${BSYS[$imp]} | ${BW1[$imp]} ns | $w2 | $r2 |"
done
echo "slow path / remove lock: $(ratio "${BINS[runtime]}" "${BINS[atomic]}")x instructions," \
  "$(ratio "${BW1[runtime]}" "${BW1[atomic]}")x wall; fast path / remove lock: $(ratio "${BINS[fast]}" "${BINS[atomic]}")x instructions," \
  "$(ratio "${BW1[fast]}" "${BW1[atomic]}")x wall, 2 threads / 1: $(ratio "${BW2[fast]}" "${BW1[fast]}")x" \
  "(issue 21's targets: <= 30 instructions, 0 system calls, 2 threads <= 1.5x 1 thread)"

# --- where pnp's instructions go (optional) ----------------------------------------------
if [ "${COMPARE_PROFILE:-0}" = 1 ]; then
  if [ $have_valgrind = 1 ] && command -v callgrind_annotate >/dev/null 2>&1; then
    valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" "$BIN" pnpw 16 1001 >/dev/null 2>&1
    echo
    echo "pnpw, 16 clients, 1001 rounds: callgrind_annotate, self cost by function (inlined code counts in its caller)"
    callgrind_annotate --auto=no "$tmp/cg.out" 2>/dev/null | sed -n '/file:function/,$p' | head -n 14
  else
    skip "profile: valgrind or callgrind_annotate missing"
  fi
fi

# --- firmware: thumbv7em-none-eabihf, the firmware profile -------------------------------
# The core's .text against issue 20's 8 KiB, by family, statig-fsm under the same profile,
# the machine's RAM (compare/firmware/measure.sh, which also runs alone).
bash compare/firmware/measure.sh
