#!/usr/bin/env bash
# Every op family's GPU tests under compute-sanitizer: memcheck, racecheck,
# initcheck, synccheck.
#
#   bash scripts/sanitize.sh [tool ...]     (default: all four; run from anywhere)
#   SANITIZE_CHUNKS="dsa_metadata kv_read_table" bash scripts/sanitize.sh memcheck
#   bash scripts/sanitize.sh --plan         (one command per chunk and tool, each within
#                                            a 10-minute slot on one H200)
#
# The tests are cut into chunks, one per op family (CHUNKS below); each (tool,
# chunk) is one pytest process under the sanitizer, bounded by SANITIZE_TIMEOUT
# seconds, with the small `sanitize` hypothesis profile and the caching
# allocator off. So that one error hides no other: pytest runs every test of
# the chunk (no -x), the sanitizer ends only the faulting kernel and keeps the
# CUDA context (--destroy-on-device-error kernel) and prints up to 100
# reports, and every chunk runs whatever the previous ones found.
#
# Output, in $OUT (default ./device-out):
#   sanitize/summary.txt                 one line per (tool, chunk): verdict, sanitizer errors,
#                                        gpu-marked tests passed, pytest's counts, seconds
#   sanitize/<tool>-<chunk>.<pid>.sanitizer.log  the sanitizer's report per process (ends with
#                                        its ERROR SUMMARY)
#   sanitize/<tool>-<chunk>.pytest.log   pytest's output (header with the seed; failures)
# Exit 0 iff every (tool, chunk) reported 0 sanitizer errors, passed all its
# tests and passed at least one gpu-marked test.
#
# Environment:
#   PYTHON            interpreter (default python3)
#   COMPUTE_SANITIZER path of compute-sanitizer (default: PATH, then /usr/local/cuda/bin)
#   SANITIZE_CHUNKS   chunks to run (default: all, in CHUNKS order)
#   SANITIZE_TIMEOUT  seconds per (tool, chunk) (default 540: one per 10-minute slot)
#   SANITIZE_K        pytest -k expression ANDed with every chunk's (default: not compile:
#                     inductor's own tracing and Triton kernels; the eager and CUDA-graph
#                     tests launch the same kernels)
#   SGLMETA_HYPOTHESIS_PROFILE  (default sanitize: a few dozen examples per op)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

# chunk name -> "test files[|-k expression]". Tests that trip a device assert on
# purpose run in child processes; only the reliability chunk follows its
# children (the matrix workers' CUDA calls), without the assert rows.
declare -A CHUNKS=(
  [trtllm_mha_metadata]="tests/test_trtllm_mha_metadata.py"
  [trtllm_mha_metadata_multi]="tests/test_trtllm_mha_metadata_multi.py tests/test_sglang_trtllm_mha_spec.py"
  [trtllm_mha_page_table]="tests/test_trtllm_mha_page_table.py tests/test_trtllm_mha_page_table_errors.py"
  [dsa_metadata]="tests/test_dsa_metadata.py tests/test_dsa_metadata_errors.py"
  [dsa_metadata_copy]="tests/test_dsa_metadata_copy.py tests/test_dsa_metadata_copy_errors.py"
  [kv_read_table]="tests/test_kv_read_table.py"
  [kv_indices]="tests/test_kv_indices.py tests/test_build_draft_decode_kv_indices.py"
  [flash_attention_metadata]="tests/test_flash_attention_metadata.py tests/test_flash_attention_verify_expand.py tests/test_flash_attention_draft_decode_topk.py"
  [vllm]="tests/test_vllm_block_table.py tests/test_vllm_input_batch.py tests/test_vllm_ops_integration.py tests/test_vllm_spec_decode.py tests/test_vllm_flashinfer.py"
  [fast_path]="tests/test_fast_path.py"
  [reliability]="tests/reliability tests/test_hostile_lengths.py|not trips_device_assert"
)
ORDER=(trtllm_mha_metadata trtllm_mha_metadata_multi trtllm_mha_page_table dsa_metadata dsa_metadata_copy
       kv_read_table kv_indices flash_attention_metadata vllm fast_path reliability)
ALL_TOOLS=(memcheck racecheck initcheck synccheck)

if [[ ${1:-} == --plan ]]; then
  for chunk in "${ORDER[@]}"; do
    for tool in "${ALL_TOOLS[@]}"; do echo "SANITIZE_CHUNKS=$chunk bash scripts/sanitize.sh $tool"; done
  done
  exit 0
fi

OUT=${OUT:-device-out}
mkdir -p "$OUT/sanitize"
PY=${PYTHON:-python3}
SAN=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
TIMEOUT=${SANITIZE_TIMEOUT:-540}
K=${SANITIZE_K:-not compile}
read -r -a chunks <<< "${SANITIZE_CHUNKS:-${ORDER[*]}}"
tools=("$@")
[[ ${#tools[@]} -eq 0 ]] && tools=("${ALL_TOOLS[@]}")
for chunk in "${chunks[@]}"; do
  [[ -n ${CHUNKS[$chunk]:-} ]] || { echo "sanitize: unknown chunk $chunk (known: ${ORDER[*]})"; exit 2; }
done

export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
# Every tensor its own cudaMalloc: an out-of-bounds access leaves its allocation
# (memcheck sees it) instead of landing in a neighbour inside a cached block, and
# initcheck tracks each buffer from its own allocation (standard practice).
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
export SGLMETA_HYPOTHESIS_PROFILE=${SGLMETA_HYPOTHESIS_PROFILE:-sanitize}
# a GPU test that cannot run fails (tests/conftest.py): no chunk passes on skips
export SGLMETA_REQUIRE_GPU=1

if [[ ! -x "$SAN" ]]; then
  echo "sanitize: compute-sanitizer not found (set COMPUTE_SANITIZER)"; exit 2
fi
if ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "sanitize: FAIL: $PY sees no CUDA device (torch.cuda.is_available() is not True)"; exit 2
fi
help=$("$SAN" --help 2>&1)
"$SAN" --version 2>&1 | tail -1

summary_file="$OUT/sanitize/summary.txt"
status=0
for chunk in "${chunks[@]}"; do
  read -r -a files <<< "${CHUNKS[$chunk]%%|*}"
  k=$K
  [[ ${CHUNKS[$chunk]} == *"|"* ]] && k="($K) and (${CHUNKS[$chunk]#*|})"
  targets=application-only
  [[ $chunk == reliability ]] && targets=all
  for tool in "${tools[@]}"; do
    name="$tool-$chunk"
    log="$OUT/sanitize/$name.pytest.log"
    rm -f "$OUT/sanitize/$name".*.sanitizer.log
    # one report per process (%p: its id)
    opts=(--tool "$tool" --target-processes "$targets" --error-exitcode 99
          --report-api-errors no --print-limit 100 --log-file "$OUT/sanitize/$name.%p.sanitizer.log")
    # where this version has them: red zones after every allocation, and the
    # context kept alive after a device error (later tests still run and report)
    [[ $tool == memcheck ]] && grep -q -- "--padding" <<<"$help" && opts+=(--padding 256)
    grep -q -- "--destroy-on-device-error" <<<"$help" && opts+=(--destroy-on-device-error kernel)
    echo "=== $tool $chunk: pytest ${files[*]} -m gpu -k '$k' (limit ${TIMEOUT}s)"
    start=$SECONDS
    timeout -k 15 "$TIMEOUT" "$SAN" "${opts[@]}" \
      "$PY" -m pytest "${files[@]}" -m gpu -k "$k" -p no:cacheprovider -o addopts="" -rfE >"$log" 2>&1
    rc=$?
    secs=$((SECONDS - start))
    # "ERROR SUMMARY: N errors" (memcheck, initcheck, synccheck) or "RACECHECK
    # SUMMARY: H hazards displayed (N errors, W warnings)", per process: summed
    errors=$(cat "$OUT/sanitize/$name".*.sanitizer.log 2>/dev/null |
      grep -oE "ERROR SUMMARY: [0-9]+|\([0-9]+ errors" | grep -oE "[0-9]+" | awk '{s += $1; n++} END {if (n) print s}')
    gpu_passed=$(grep -oE "gpu-marked tests: [0-9]+ passed" "$log" | grep -oE "[0-9]+" | tail -1)
    tests=$(grep -E "[0-9]+ (passed|failed|errors?|skipped)" "$log" | tail -1 |
      sed -E 's/=+//g; s/ in [0-9.]+s.*//; s/^ +| +$//g')
    case $rc in
      0) verdict=clean ;;
      99) verdict=ERRORS ;;
      124|137) verdict=TIMEOUT ;;
      *) verdict="FAILED(rc=$rc)" ;;
    esac
    if [[ $verdict == clean && -z $errors ]]; then verdict=NO-SANITIZER-SUMMARY; fi
    if [[ $verdict == clean && ${gpu_passed:-0} -eq 0 ]]; then verdict=NO-GPU-TESTS-RAN; fi
    [[ ${errors:-0} -gt 0 && $verdict != ERRORS ]] && verdict="ERRORS+$verdict"
    [[ $verdict != clean ]] && status=1
    line=$(printf 'tool=%-9s chunk=%-26s %-20s sanitizer_errors=%-4s gpu_passed=%-5s pytest="%s" %ss' \
      "$tool" "$chunk" "$verdict" "${errors:-?}" "${gpu_passed:-0}" "${tests:-no summary}" "$secs")
    echo "$line" | tee -a "$summary_file"
    if [[ $verdict != clean ]]; then  # the first reports, short
      grep -h -m 6 -E "^=========  *(Invalid|Uninitialized|Race|Barrier|Error|Program hit|Warning)|^(FAILED|ERROR) " \
        "$OUT/sanitize/$name".*.sanitizer.log "$log" 2>/dev/null | cut -c1-200
    fi
  done
done

echo
echo "=== sanitize summary (appended to $summary_file; logs: $OUT/sanitize/<tool>-<chunk>.*)"
tail -n "$(( ${#chunks[@]} * ${#tools[@]} ))" "$summary_file"
exit $status
