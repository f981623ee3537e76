#!/usr/bin/env bash
# Flash and RAM of the QEMU example, by part: symbol sizes from `llvm-nm --print-size`
# (Debian's llvm package; `nm` from binutils-arm-none-eabi works the same), attributed by the
# crate in the demangled name. With LTO a function inlined into another counts where it
# was inlined; unnamed constants (.Lanon: panic locations, format strings, tables) are
# counted apart. Usage: size-by-part.sh [ELF]
set -euo pipefail
cd "$(dirname "$0")"
elf=${1:-target/thumbv7em-none-eabihf/release/pnp-lifecycle-firmware-qemu}
nm=$(command -v llvm-nm || command -v arm-none-eabi-nm)
size=$(command -v llvm-size || command -v arm-none-eabi-size)
"$size" -A "$elf" | grep -E '^\.(vector_table|text|rodata|data|bss|uninit) '
"$nm" --print-size --size-sort -C --radix=d "$elf" | awk '
{
    size = $2 + 0; kind = $3; name = $4
    for (i = 5; i <= NF; i++) name = name " " $i
    sub(/^[<&]+/, "", name)
    if (name ~ /^pnp_lifecycle_firmware_qemu::/ || name ~ /^(HCA_CATASTROPHIC|TIMER0|__INTERRUPTS|main)$/) part = "example"
    else if (name ~ /^pnp_lifecycle_firmware::/) part = "port"
    else if (name ~ /^pnp_lifecycle::/) part = "core"
    else if (name ~ /^\.Lanon/ || name ~ /^anon\./) part = "constants"
    else part = "runtime"
    ram = (kind ~ /^[dDbB]$/)
    if (ram) r[part] += size; else f[part] += size
    if (kind ~ /^[dD]$/) f[part] += size   # .data also has its initial image in flash
}
END {
    printf "%-10s %8s %8s\n", "part", "flash", "ram"
    n = split("core port example runtime constants", parts, " ")
    for (i = 1; i <= n; i++) { p = parts[i]; printf "%-10s %8d %8d\n", p, f[p], r[p]; tf += f[p]; tr += r[p] }
    printf "%-10s %8d %8d\n", "total", tf, tr
}'
