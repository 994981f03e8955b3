#!/usr/bin/env bash
# Fuzzes the .air loader with libFuzzer (tests/fuzz/fuzz_air_load.c) for
# SECONDS (default 600) on the committed seed corpus (tests/fuzz/corpus:
# real saved graphs). New inputs go to build/fuzz/corpus, findings
# (crash-*, leak-*, timeout-*) to build/fuzz/findings. Needs clang
# (scripts/setup.sh installs it from Debian's packages where apt exists).
#   scripts/fuzz.sh [SECONDS] [JOBS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
jobs=${2:-1}
command -v clang >/dev/null || { echo "fuzz.sh: clang not found" >&2; exit 1; }
CC=clang cmake -S . -B build/fuzz -DAIR_FUZZ=ON -DAIR_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build/fuzz -j "$(nproc)" --target fuzz_air_load
mkdir -p build/fuzz/corpus build/fuzz/findings
# allocator_may_return_null: a hostile size must come back as an error,
# which is what the loader is being tested for, not abort in ASan; and no
# allocation above 1 GB (a damaged graph asks for huge activations: ASan's
# shadow of them alone filled gigabytes and tripped the RSS limit)
export ASAN_OPTIONS=allocator_may_return_null=1:max_allocation_size_mb=1024:detect_leaks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
root=$(pwd)
parallel=()
if [ "$jobs" -gt 1 ]; then
  parallel=(-jobs="$jobs" -workers="$jobs")
  cd build/fuzz # each job logs to build/fuzz/fuzz-N.log
fi
"$root/build/fuzz/fuzz_air_load" "$root/build/fuzz/corpus" "$root/tests/fuzz/corpus" \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=3072 -malloc_limit_mb=1048576 -max_len=65536 \
  "${parallel[@]}" -artifact_prefix="$root/build/fuzz/findings/" -print_final_stats=1
