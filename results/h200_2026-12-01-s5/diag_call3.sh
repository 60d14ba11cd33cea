#!/usr/bin/env bash
# Session 5, call 3: the build of main (F = one column per thread + stream
# pow2): the whole GPU suite, memcheck of the changed kernels' tests, op_shapes
# (all cases); then the KV page table with the short live-column path (G) vs F.
set -u
export PYTHONUNBUFFERED=1
R=/tmp/res3; mkdir -p $R
T0=$(date +%s); t() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
tar xJf scratch/ab3.tar.xz -C scratch
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/msgspec-*.whl > /dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site --python-version 3.11 --implementation cp --abi cp311 --platform manylinux_2_34_x86_64 --only-binary=:all: .whl/sglang-0.5.23-*.whl > /dev/null 2>&1
cp scratch/ab3/F.so sgl_meta/_C.abi3.so
t "gpu suite on F"
PYTHONPATH=$PWD:/tmp/site OUT=$R JOBS=8 timeout 240 bash scripts/gpu_tests.sh > $R/gpu_suite.txt 2>&1; echo "suite rc=$?"; grep -E "passed|failed|error" $R/gpu_suite.txt | awk -F': ' '{print $2}' | awk '{p+=$1} /failed/ {f=1} END {print "passed total", p, (f ? "SOME FAILED" : "")}'; grep -E "^(FAILED|ERROR)" $R/gpu_suite.txt | head
t "memcheck"
OUT=$R SANITIZE_TIMEOUT=220 SANITIZE_K='(kv_read or trtllm or page_table) and not hostile and not bad_inputs and not compile' timeout 240 bash scripts/sanitize.sh memcheck 2>&1 | tail -2
export PYTHONPATH=$PWD
t "op_shapes F all"
timeout 120 python3 benchmarks/op_shapes.py --no-eager --json $R/ops_F_all.json > $R/ops_F_all.log 2>&1; echo rc=$?; cut -c1-48,76-200 $R/ops_F_all.log
for v in G F G F; do
  cp scratch/ab3/$v.so sgl_meta/_C.abi3.so
  t "op_shapes kv $v"
  timeout 60 python3 benchmarks/op_shapes.py --only kv_read_page_table --no-eager --json $R/ops_kv_$v$SECONDS.json > $R/ops_kv_$v$SECONDS.log 2>&1
  grep -E "gather" $(ls -t $R/ops_kv_$v*.log | head -1) | cut -c1-48,76-200
done
t done
tar czf $OUT/res3.tgz -C /tmp res3
