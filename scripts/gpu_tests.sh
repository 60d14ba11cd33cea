#!/usr/bin/env bash
# The GPU tests, one pytest process per test file (JOBS at a time, default 6):
# a device-side assert poisons the CUDA context of its process, so in a single
# process one such failure would fail every later test too. Logs go to
# $OUT/gpu-tests/ (default ./device-out); exit 0 iff every file passed or had
# no GPU test.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
OUT=${OUT:-device-out}
PY=${PYTHON:-python3}
mkdir -p "$OUT/gpu-tests"
# shellcheck disable=SC2016  # $0..$2 belong to the inner sh
printf "%s\n" tests/test_*.py tests/*/test_*.py | xargs -P "${JOBS:-6}" -I{} sh -c '
  log="$1/gpu-tests/$(echo "$2" | tr / _).log"
  "$0" -m pytest "$2" -q -p no:cacheprovider -m gpu -o addopts=-ra > "$log" 2>&1
  echo "$? $2"' "$PY" "$OUT" {} > "$OUT/gpu-tests/rc.txt"
for f in "$OUT"/gpu-tests/*.log; do printf '%s: %s\n' "$(basename "$f" .log)" "$(tail -n 1 "$f")"; done
grep -h -E "^(FAILED|ERROR)" "$OUT"/gpu-tests/*.log
# pytest exit status: 0 all passed, 5 nothing collected (no GPU test in the file)
! awk '$1 != 0 && $1 != 5' "$OUT/gpu-tests/rc.txt" | grep -q .
