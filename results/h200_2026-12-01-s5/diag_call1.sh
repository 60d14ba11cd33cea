#!/usr/bin/env bash
# Session 5, call 1: branch next/kv-short-rows (B) vs main (A): the whole GPU
# suite on B, op_shapes KV rows A/B/A/B, the small-row floor probe (issue 11),
# memcheck of the KV tests on B.
set -u
export PYTHONUNBUFFERED=1
R=/tmp/res; mkdir -p $R
T0=$(date +%s); t() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/gpu.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/msgspec-*.whl > /dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site --python-version 3.11 --implementation cp --abi cp311 --platform manylinux_2_34_x86_64 --only-binary=:all: .whl/sglang-0.5.23-*.whl > /dev/null 2>&1
cp scratch/ab/B.so sgl_meta/_C.abi3.so
t "gpu suite on B"
PYTHONPATH=$PWD:/tmp/site OUT=$R JOBS=8 timeout 240 bash scripts/gpu_tests.sh > $R/gpu_suite.txt 2>&1; echo "suite rc=$?"; tail -45 $R/gpu_suite.txt | grep -v ": $" | cut -c1-150
export PYTHONPATH=$PWD
for v in A B A B; do
  t "op_shapes $v"
  cp scratch/ab/$v.so sgl_meta/_C.abi3.so
  timeout 70 python3 benchmarks/op_shapes.py --only kv_read --no-eager --json $R/ops_$v$SECONDS.json > $R/ops_$v.$SECONDS.log 2>&1; echo rc=$?
  grep -E "gather|kv_read" $(ls -t $R/ops_$v.*.log | head -1) | cut -c1-48,84-200
done
cp scratch/ab/B.so sgl_meta/_C.abi3.so
t "floor probe"
OUT=$R PYTHONPATH=$PWD:/tmp/site timeout 120 python3 scratch/probe_floor.py /tmp/site > $R/probe_floor.log 2>&1; echo rc=$?; cat $R/probe_floor.log | tail -25
t "memcheck kv on B"
OUT=$R SANITIZE_TIMEOUT=150 SANITIZE_K='kv_read and not hostile and not bad_inputs and not compile' timeout 170 bash scripts/sanitize.sh memcheck 2>&1 | tail -4
t done
tar czf $OUT/res.tgz -C /tmp res
