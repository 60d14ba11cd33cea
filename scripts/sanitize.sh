#!/usr/bin/env bash
# The CUDA tests under compute-sanitizer: memcheck, racecheck, initcheck, synccheck.
#
#   bash scripts/sanitize.sh [tool ...]        (default: all four; run from anywhere)
#
# Runs `pytest tests -m gpu` minus the tests that spawn their own processes or
# trip device asserts on purpose (hostile values), with the small `sanitize`
# hypothesis profile. Each tool is one pytest process under the sanitizer with
# --error-exitcode, bounded by SANITIZE_TIMEOUT seconds. Prints one line per
# tool at the end; full logs go to $OUT (default ./device-out):
#   sanitize-<tool>.log         the sanitizer's report (ends with ERROR SUMMARY)
#   sanitize-<tool>.pytest.log  pytest's output
#
# Environment:
#   PYTHON            interpreter (default python3)
#   COMPUTE_SANITIZER path of compute-sanitizer (default: PATH, then /usr/local/cuda/bin)
#   SANITIZE_TIMEOUT  seconds per tool (default 280, so two tools fit a 10-minute slot)
#   SANITIZE_K        pytest -k expression (default excludes hostile / subprocess / compile tests)
#   SGL_META_HYPOTHESIS_PROFILE  (default sanitize: a few dozen examples per op)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
OUT=${OUT:-device-out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
SAN=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
TIMEOUT=${SANITIZE_TIMEOUT:-280}
# compile: inductor's own host-side tracing and Triton kernels, not ours (the
# eager and CUDA-graph tests launch the same kernel); hostile, bad_inputs: child
# processes (device asserts on purpose; host-side errors before any launch).
K=${SANITIZE_K:-not hostile and not bad_inputs and not compile}
tools=("$@")
[[ ${#tools[@]} -eq 0 ]] && tools=(memcheck racecheck initcheck synccheck)

export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
# Every tensor its own cudaMalloc: an out-of-bounds access leaves its allocation
# (memcheck sees it) instead of landing in a neighbour inside a cached block, and
# initcheck tracks each buffer from its own allocation (standard practice).
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
export SGL_META_HYPOTHESIS_PROFILE=${SGL_META_HYPOTHESIS_PROFILE:-sanitize}

if [[ ! -x "$SAN" ]]; then
  echo "sanitize: compute-sanitizer not found (set COMPUTE_SANITIZER)"; exit 2
fi
help=$("$SAN" --help 2>&1)
"$SAN" --version 2>&1 | tail -1

summary=()
status=0
for tool in "${tools[@]}"; do
  opts=(--tool "$tool" --target-processes application-only --error-exitcode 99
        --report-api-errors no --print-limit 100 --log-file "$OUT/sanitize-$tool.log")
  # red zones after every allocation, where this version has them
  [[ $tool == memcheck ]] && grep -q -- "--padding" <<<"$help" && opts+=(--padding 256)
  log="$OUT/sanitize-$tool.pytest.log"
  echo "=== $tool: pytest tests -m gpu -k '$K' (profile $SGL_META_HYPOTHESIS_PROFILE, limit ${TIMEOUT}s)"
  start=$SECONDS
  timeout -k 15 "$TIMEOUT" "$SAN" "${opts[@]}" \
    "$PY" -m pytest tests -m gpu -k "$K" -q -p no:cacheprovider -o addopts="" >"$log" 2>&1
  rc=$?
  secs=$((SECONDS - start))
  # "ERROR SUMMARY: N errors" (memcheck, initcheck, synccheck) or
  # "RACECHECK SUMMARY: H hazards displayed (N errors, W warnings)"
  errors=$(grep -oE "ERROR SUMMARY: [0-9]+|\([0-9]+ errors" "$OUT/sanitize-$tool.log" 2>/dev/null |
    tail -1 | grep -oE "[0-9]+")
  tests=$(grep -E "[0-9]+ (passed|failed|errors?|skipped)" "$log" | tail -1 | sed -E 's/=+//g; s/ in [0-9.]+s.*//; s/^ +| +$//g')
  case $rc in
    0) verdict=clean; grep -q " passed" <<<"$tests" || { verdict=NO-TESTS-RAN; rc=3; } ;;
    99) verdict=ERRORS ;;
    124|137) verdict=TIMEOUT ;;
    *) verdict="FAILED(rc=$rc)" ;;
  esac
  [[ $rc -ne 0 ]] && status=1
  summary+=("$(printf '%-10s %-14s errors=%-5s %-48s %4ss' "$tool" "$verdict" "${errors:-?}" "${tests:-no pytest summary}" "$secs")")
  if [[ $rc -ne 0 ]]; then  # the first reports, short
    grep -m 6 -E "^=========  *(Invalid|Uninitialized|Race|Barrier|Error|Program hit|Warning)|^[A-Z]+ .*::" \
      "$OUT/sanitize-$tool.log" "$log" 2>/dev/null | cut -c1-200
  fi
done

echo
echo "=== sanitize summary (logs: $OUT/sanitize-<tool>.log, .pytest.log)"
printf '%s\n' "${summary[@]}"
exit $status
