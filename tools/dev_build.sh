#!/usr/bin/env bash
# Incremental rebuild of torchneuron_ext._C for development. The library is
# replaced by rename, so processes that have the old one loaded keep running.
set -euo pipefail
cd "$(dirname "$0")/.."
MAX_JOBS=${MAX_JOBS:-2} python setup.py build_ext > /tmp/torchneuron_build.log 2>&1 || { grep -E "error|Error" /tmp/torchneuron_build.log | head -30; exit 1; }
so=$(ls build/lib.*/torchneuron_ext/_C*.so)
cp "$so" torchneuron_ext/.C_new.so
mv torchneuron_ext/.C_new.so "torchneuron_ext/$(basename "$so")"
echo "built $(basename "$so")"
