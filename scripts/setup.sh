#!/usr/bin/env bash
# Installs everything torchair needs on a fresh machine (PyPI only), then
# builds and installs torchair itself. torch is pinned: a looser requirement
# would pull a multi-GB CUDA build. openvino is a peer the benchmark compares
# with (bench/modes.py), as its users install it; torchao gives PT2E and
# weight-only quantization, the peer and the front end of torchair's int8 route.
set -euo pipefail
cd "$(dirname "$0")/.."
# clang for the .air loader's fuzzer (scripts/fuzz.sh, scripts/test.sh),
# from Debian's packages; skipped where there is no apt or no root
if ! command -v clang >/dev/null && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q clang) >/dev/null 2>&1 ||
    echo "setup.sh: could not install clang; the fuzzer will be skipped" >&2
fi
python3 -m pip install -q --upgrade pip >/dev/null 2>&1 || true
python3 -m pip install -q "torch==2.13.0" "transformers>=4.40" pytest expecttest numpy matplotlib openvino "torchao==0.18.0" \
  "scikit-build-core>=0.8" cmake ninja
python3 -m pip install -q --no-build-isolation --no-deps -Cbuild-dir=build/wheel .
python3 -c "import torchair; print('torchair', torchair.__version__, 'isa', torchair._C.isa())"
