#!/usr/bin/env bash
# Builds and installs torchair into the current Python (non-editable, with a
# persistent build dir so rebuilds are incremental). Serialized with a lock
# so concurrent developers do not clobber each other's install.
set -euo pipefail
cd "$(dirname "$0")/.."
exec flock /tmp/torchair-install.lock \
  pip install --no-build-isolation --no-deps -q -Cbuild-dir=build/wheel . "$@"
