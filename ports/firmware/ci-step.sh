#!/usr/bin/env bash
# The firmware port on a real (emulated) Cortex-M4: build ports/firmware/qemu for
# thumbv7em-none-eabihf, boot it on QEMU's mps2-an386 and check what it prints.
# Called from .ci/run as `bash ports/firmware/ci-step.sh` (from the repository root).
# Fails on a build error, a panic or hard fault, a failed check, a missing outcome line, or
# a hang (time limit). Skips, saying why, only when qemu-system-arm cannot be installed.
set -euo pipefail
cd "$(dirname "$0")/qemu"
start=$SECONDS

if ! command -v qemu-system-arm >/dev/null 2>&1; then
    echo "firmware-qemu: qemu-system-arm missing, installing it with apt-get"
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-system-arm; } >/tmp/firmware-qemu-apt.log 2>&1; then
        tail -5 /tmp/firmware-qemu-apt.log || true
    fi
fi
if ! command -v qemu-system-arm >/dev/null 2>&1; then
    echo "firmware-qemu: SKIPPED: qemu-system-arm could not be installed (apt-get failed; see above)"
    exit 0
fi
rustup target add thumbv7em-none-eabihf >/dev/null 2>&1 || true

# Its own workspace and target directory (.cargo/config.toml sets the target and runner).
cargo build --release --locked
elf=target/thumbv7em-none-eabihf/release/pnp-lifecycle-firmware-qemu
out=$(mktemp)
set +e
timeout 60 qemu-system-arm -cpu cortex-m4 -machine mps2-an386 -nographic -monitor none \
    -serial none -semihosting-config enable=on,target=native -icount shift=6 \
    -kernel "$elf" >"$out" 2>&1
status=$?
set -e
cat "$out"
fail() { echo "firmware-qemu: FAILED: $*"; exit 1; }
[ "$status" -ne 124 ] || fail "hang: no exit within 60 s"
! grep -q '^PANIC' "$out" || fail "panic or fault on the target"
! grep -q '^CHECK FAILED' "$out" || fail "a check failed on the target"
[ "$status" -eq 0 ] || fail "semihosting exit status $status"
# Each client count runs twice: interrupt path "latch" (the default) and "feed".
for n in 1 4 8; do
    for path in latched fed; do
        grep -q "^cycle: $n clients, isr $path, .*: completed$" "$out" ||
            fail "reset cycle with $n clients (isr $path) did not complete"
    done
    [ "$(grep -c "^power: $n clients, idle power-down, .*: resumed$" "$out")" -eq 2 ] ||
        fail "low-power entry/exit with $n clients did not resume in both runs"
    [ "$(grep -c "^unload: $n clients, .*UnloadMayFinish x1: finished exactly once$" "$out")" -eq 2 ] ||
        fail "unload with $n clients did not finish exactly once in both runs"
done
# The latching interrupt keeps interrupts masked for the same instructions whatever the
# number of clients. The probe reads SysTick at 1.6 ticks an instruction, so a count is
# exact to +-1 instruction: allow a spread of 2 across 1, 4 and 8 clients (feeding in the
# interrupt grows by hundreds of instructions a client).
isr=$(sed -n 's/^latency: isr path latch, [0-9]* clients, masked instructions: fatal-error isr \([0-9]*\),.*/\1/p' "$out" | sort -n)
[ "$(printf '%s\n' "$isr" | grep -c .)" -eq 3 ] || fail "expected the latching interrupt's masked time for 1, 4 and 8 clients, got: $isr"
spread=$(( $(printf '%s\n' "$isr" | tail -1) - $(printf '%s\n' "$isr" | head -1) ))
[ "$spread" -le 2 ] || fail "latching interrupt's masked time depends on the clients: $(echo $isr)"
grep -qx 'RESULT: PASS' "$out" || fail "no RESULT: PASS line"
echo "firmware-qemu: 1 passed, 0 failed ($((SECONDS - start)) s including the build)"
