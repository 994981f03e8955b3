#!/usr/bin/env bash
# Runs every test: the C unit tests (plain, and under ASan+UBSan), the Python
# tests against eager, and the benchmark's quick mode so it cannot rot.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

echo "== C tests"
cmake -S . -B build/c -G Ninja -DAIR_WERROR=ON >/dev/null
cmake --build build/c -j "$jobs"
(cd build/c && ctest --output-on-failure -j "$jobs")

echo "== C tests under AddressSanitizer + UndefinedBehaviorSanitizer"
cmake -S . -B build/asan -G Ninja -DAIR_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build/asan -j "$jobs"
(cd build/asan && ctest --output-on-failure -j "$jobs" -E '_(avx2|scalar|avx512)$')

if command -v clang >/dev/null; then
  echo "== fuzzing the .air loader for 30 s (scripts/fuzz.sh; longer runs: scripts/fuzz.sh SECONDS)"
  scripts/fuzz.sh 30
else
  echo "== clang not found: the .air loader's fuzzer is skipped (scripts/setup.sh installs clang)"
fi

echo "== Python tests"
python3 -m pytest tests/python -q

echo "== benchmark quick mode"
python3 -m bench --quick --out quick
