#!/usr/bin/env bash
# The firmware figures of issue 12 and issue 20 (target: the core's .text <= 8 KiB): the core
# built into a bare-metal image for thumbv7em-none-eabihf (src/main.rs: one device, four
# clients, one port, every input opaque) under this folder's release profile, the one a
# 64 KiB-RAM firmware would ship (Cargo.toml: opt-level "z", lto "fat", codegen-units 1,
# panic abort); statig-fsm in the same skeleton under the same profile; the core's .text by
# family; its RAM. `compare/run.sh` runs it last; alone: `bash compare/firmware/measure.sh`
# (FIRMWARE_TOP=N also lists the N largest functions).
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TERM_COLOR=never
skip() { printf 'SKIPPED: %s\n' "$*"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
TARGET_BYTES=8192

# The profile, read from the manifest that sets it, so the heading cannot drift from it.
profile=$(awk '/^\[profile.release\]/ {p = 1; next} /^\[/ {p = 0}
  p && /=/ {gsub(/ /, ""); printf "%s%s", sep, $0; sep = ", "}' compare/firmware/Cargo.toml)
echo
echo "## firmware: thumbv7em-none-eabihf, release profile of compare/firmware/Cargo.toml:"
echo "## $profile (statig-fsm built under the same profile);"
echo "## Lifecycle<1 device, 4 clients, 1 port, queue_capacity(1, 4)> in a static, every input opaque"
if ! rustc --print target-libdir --target thumbv7em-none-eabihf 2>/dev/null | xargs -r test -d; then
  skip "firmware figures: the thumbv7em-none-eabihf target is not installed (rustup target add thumbv7em-none-eabihf)"
  exit 0
fi
if ! command -v readelf >/dev/null 2>&1; then
  skip "firmware figures: readelf (binutils) is not installed"
  exit 0
fi
have_peers=1
[ -d ../shared/peers/statig-fsm ] || have_peers=0
fw_dir=target/compare-firmware
fw() { # fw FEATURES...: build the image, print its path
  (cd compare/firmware && CARGO_TARGET_DIR="../../$fw_dir" \
    cargo build -q --release --target thumbv7em-none-eabihf "$@")
  local out="$tmp/fw$(printf '%s' "$*" | tr -c 'a-z' '_')"
  cp "$fw_dir/thumbv7em-none-eabihf/release/pnp-compare-firmware" "$out"
  echo "$out"
}
# section SECTION ELF: its size in bytes (readelf reads any ELF machine; awk here may be mawk:
# no strtonum, so bash converts the hex).
section() {
  local hex
  hex=$(readelf -SW "$2" | sed 's/^ *\[ *[0-9]*\]//' | awk -v s="$1" '$1 == s {print $5; exit}')
  echo $((16#${hex:-0}))
}
# size VALUE: readelf -s prints a symbol's size in decimal, or in hex with 0x when large.
sz() { case "$1" in 0x*) echo $((16#${1#0x})) ;; "") echo 0 ;; *) echo "$1" ;; esac; }
# symbol NAME ELF: its size in bytes; symbols_matching RE ELF: the sizes of matching functions, summed.
symbol() { sz "$(readelf -sW "$2" | awk -v s="$1" '$8 == s {print $3; exit}')"; }
symbols_matching() {
  local t=0 v
  for v in $(readelf -sW "$2" | awk -v re="$1" '$4 == "FUNC" && $8 ~ re {print $3}'); do
    t=$((t + $(sz "$v")))
  done
  echo $t
}
# functions ELF: "size name" of every function symbol, demangled (sizes in decimal).
functions() {
  readelf -sW -C "$1" | awk '$4 == "FUNC" {
    size = $3 + 0
    if ($3 ~ /^0x/) { hex = tolower(substr($3, 3)); size = 0
      for (i = 1; i <= length(hex); i++) size = size * 16 + index("0123456789abcdef", substr(hex, i, 1)) - 1 }
    name = $8; for (i = 9; i <= NF; i++) name = name " " $i
    print size, name }'
}
img=$(fw)
base=$(fw --features baseline)
text=$(section .text "$img")
text_base=$(section .text "$base")
mem=$(symbols_matching 'compiler_builtins.*mem' "$img")
core_text=$((text - text_base))
verdict=$([ "$core_text" -le "$TARGET_BYTES" ] && echo met || echo "NOT met, $((core_text - TARGET_BYTES)) bytes over")
echo "pnp core .text: $core_text bytes ($(awk -v b=$core_text 'BEGIN{printf "%.1f", b / 1024}') KiB;" \
  "image $text - empty skeleton $text_base), of which compiler_builtins mem*: $mem"
echo "target: core .text <= 8 KiB ($TARGET_BYTES bytes, issue 20): $verdict"
if [ $have_peers = 1 ]; then
  peer=$(fw --features statig)
  text_peer=$(section .text "$peer")
  mem_peer=$(symbols_matching 'compiler_builtins.*mem' "$peer")
  echo "statig-fsm .text in the same skeleton, same profile: $((text_peer - text_base)) bytes," \
    "of which compiler_builtins mem*: $mem_peer"
  statig_ram="statig-fsm Device $(symbol SIZE_OF_STATIG_DEVICE "$peer") bytes"
else
  skip "statig-fsm's firmware row: ../shared/peers is not beside the repository"
  statig_ram="statig-fsm: skipped"
fi
# The core's .text by family: every function symbol of the image, summed by the module it
# comes from (code the optimiser inlined counts in the function it went into: the owner
# loop `work::run` holds the inlined entry and front end).
echo "pnp core .text by family (function symbols; inlined code counts where it was inlined):"
functions "$img" | awk '{
    size = $1; name = $0; sub(/^[0-9]+ /, "", name)
    if (name ~ /machine::groups|device::group::/) f = "reset groups"
    else if (name ~ /pnp_lifecycle::machine::dispatch/) f = "dispatch (the match over inputs, small handlers inlined)"
    else if (name ~ /work::run|pnp_lifecycle::machine|pnp_lifecycle::table|pnp_lifecycle::queue|pnp_lifecycle::types|pnp_lifecycle::owner_loop/) f = "entry and front end (owner loop, handle, table, queue; Timeout and Unload, each device'"'"'s timeout scan inlined)"
    else if (name ~ /device::pnp::/) f = "PnP (add, start, stop, queries)"
    else if (name ~ /device::reset::/) f = "reset (fatal errors, the cycle)"
    else if (name ~ /device::removal::/) f = "removal"
    else if (name ~ /device::power::/) f = "power"
    else if (name ~ /device::clients::|pnp_lifecycle::registry|pnp_lifecycle::mailbox|device::links::/) f = "clients (registry, mailbox, events, links)"
    else if (name ~ /device::fast::/) f = "fast path"
    else if (name ~ /device::deadlines::/) f = "deadlines"
    else if (name ~ /pnp_lifecycle::device/) f = "device (set_phase, fail, phases)"
    else if (name ~ /compiler_builtins|__aeabi/) f = "compiler_builtins"
    else if (name ~ /^OUTLINED_FUNCTION/) f = "shared sequences (the outliner'"'"'s, from any family)"
    else if (name ~ /_start|panic|pnp_compare_firmware/) f = "skeleton"
    else if (name ~ /core::(iter|slice|cmp|option|result|array|ops|num)/) f = "Rust core library (iterator and comparison helpers)"
    else f = "other"
    total[f] += size
  } END { for (f in total) printf "  %6d  %s\n", total[f], f }' | sort -rn
if [ "${FIRMWARE_TOP:-0}" -gt 0 ]; then
  echo "the ${FIRMWARE_TOP} largest functions:"
  functions "$img" | sort -rn | head -n "$FIRMWARE_TOP" |
    sed -E 's/<impl pnp_lifecycle::[a-z_:]*(Device|Lifecycle)<[_, ]*>>/\1/; s/::h[0-9a-f]{16}$//' |
    awk '{size = $1; sub(/^[0-9]+ /, ""); printf "  %6d  %s\n", size, $0}'
fi
echo "pnp RAM: the machine $(symbol PNP_MACHINE "$img") bytes (.data $(section .data "$img"), .bss $(section .bss "$img"));" \
  "$statig_ram"
echo "size_of on the target: Input $(symbol SIZE_OF_INPUT "$img"), Output $(symbol SIZE_OF_OUTPUT "$img")," \
  "Reply $(symbol SIZE_OF_REPLY "$img"), Error $(symbol SIZE_OF_ERROR "$img")" \
  "(the queue: queue_capacity(1, 4) = 17 outputs)"
if command -v llvm-size >/dev/null 2>&1; then
  echo "cross-check, llvm-size -A: .text $(llvm-size -A "$img" | awk '$1 == ".text" {print $2}')" \
    "(skeleton $(llvm-size -A "$base" | awk '$1 == ".text" {print $2}'))"
fi
