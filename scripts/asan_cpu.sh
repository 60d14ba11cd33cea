#!/usr/bin/env bash
# The CPU kernels under AddressSanitizer + UndefinedBehaviorSanitizer (no GPU).
#
#   bash scripts/asan_cpu.sh [pytest args]      (default: tests -k "not cuda")
#
# Builds a CPU-only copy of the extension with -fsanitize=address,undefined
# (and without Python's -fwrapv, so signed overflow is reported too) into
# $ASAN_DIR (default build/asan), copies the checkout next to it and
# runs pytest there with libasan + libubsan preloaded: an out-of-bounds read or
# write of a CPU kernel, or UB, aborts with a report (matrix workers inherit it).
# SGLMETA_HYPOTHESIS_PROFILE defaults to dev (ASan is ~2-3x slower).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
PY=${PYTHON:-python3}
DIR=${ASAN_DIR:-$PWD/build/asan}
mkdir -p "$DIR"
echo "building the ASan/UBSan CPU extension in $DIR ..."
SGLMETA_CPU_ONLY=1 MAX_JOBS=${MAX_JOBS:-2} \
  CFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g" \
  LDFLAGS="-fsanitize=address,undefined" \
  "$PY" setup.py build_ext --build-lib "$DIR/lib" --build-temp "$DIR/tmp" >"$DIR/build.log" 2>&1 \
  || { tail -30 "$DIR/build.log"; exit 1; }
rm -rf "$DIR/repo"
mkdir -p "$DIR/repo"
# The checkout's files (tracked, and new ones git does not ignore: tests read
# scripts/, docs/, csrc/ and benchmarks/ too), without build outputs.
git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$DIR/repo"
cp "$DIR/lib/sgl_meta/"_C*.so "$DIR/repo/sgl_meta/"
cd "$DIR/repo"
LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
export LD_PRELOAD
export ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1
export PYTHONPATH="$DIR/repo" PYTHONDONTWRITEBYTECODE=1
export SGLMETA_HYPOTHESIS_PROFILE=${SGLMETA_HYPOTHESIS_PROFILE:-dev}
"$PY" -c "import sgl_meta; assert sgl_meta.__file__.startswith('$DIR/repo'), sgl_meta.__file__"
if [[ $# -eq 0 ]]; then set -- tests -k "not cuda"; fi
exec "$PY" -m pytest "$@" -q -p no:cacheprovider
