#!/usr/bin/env bash
# The GPU tests, one pytest process per test file (JOBS at a time, default 6):
# a device-side assert poisons the CUDA context of its process, so in a single
# process one such failure would fail every later test too. Logs go to
# $OUT/gpu-tests/ (default ./device-out).
#
#   bash scripts/gpu_tests.sh [PATH ...]
#
# PATH: test files, or folders whose test_*.py files and their subfolders' run
# (default: tests, every test file), e.g. the files of one op family after a
# kernel change. Exit 0 iff torch sees a CUDA device, every file passed or had
# no GPU test, and at least one gpu-marked test passed. SGLMETA_REQUIRE_GPU=1
# (tests/conftest.py) makes a GPU test that cannot run fail instead of skip.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
OUT=${OUT:-device-out}
PY=${PYTHON:-python3}
export SGLMETA_REQUIRE_GPU=1
shopt -s nullglob
files=()
for p in "${@:-tests}"; do
  p=${p%/}
  found=()
  if [[ -d $p ]]; then
    found=("$p"/test_*.py "$p"/*/test_*.py)
  elif [[ -f $p ]]; then
    found=("$p")
  fi
  [[ ${#found[@]} -gt 0 ]] || { echo "gpu_tests: FAIL: $p is no test file, nor a folder with one"; exit 2; }
  files+=("${found[@]}")
done
shopt -u nullglob
if ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "gpu_tests: FAIL: $PY sees no CUDA device (torch.cuda.is_available() is not True): no GPU test can run"
  exit 2
fi
mkdir -p "$OUT/gpu-tests"
rm -f "$OUT"/gpu-tests/*.log
# shellcheck disable=SC2016  # $0..$2 belong to the inner sh
printf "%s\n" "${files[@]}" | xargs -P "${JOBS:-6}" -I{} sh -c '
  log="$1/gpu-tests/$(echo "$2" | tr / _).log"
  "$0" -m pytest "$2" -q -p no:cacheprovider -m gpu -o addopts=-ra > "$log" 2>&1
  echo "$? $2"' "$PY" "$OUT" {} > "$OUT/gpu-tests/rc.txt"
for f in "$OUT"/gpu-tests/*.log; do printf '%s: %s\n' "$(basename "$f" .log)" "$(tail -n 1 "$f")"; done
grep -h -E "^(FAILED|ERROR)" "$OUT"/gpu-tests/*.log
status=0
# pytest exit status: 0 all passed, 5 nothing collected (no GPU test in the file)
if awk '$1 != 0 && $1 != 5' "$OUT/gpu-tests/rc.txt" | grep -q .; then
  echo "gpu_tests: FAIL: test files that did not pass:"; awk '$1 != 0 && $1 != 5' "$OUT/gpu-tests/rc.txt"
  status=1
fi
# tests/conftest.py's summary line per file: "gpu-marked tests: P passed, F failed, S skipped"
passed=$(grep -h -o -E "gpu-marked tests: [0-9]+ passed" "$OUT"/gpu-tests/*.log | awk '{s += $3} END {print s + 0}')
echo "gpu_tests: $passed gpu-marked tests passed"
if [[ $passed -eq 0 ]]; then
  echo "gpu_tests: FAIL: no gpu-marked test passed"
  status=1
fi
exit $status
