#!/usr/bin/env bash
# Session 6, call 1: branch next/kv-page-fast-kernel (fastk) vs main, plus
# diagnostic builds of fastk (not for landing): d_trap (fail paths -> __trap, no
# printf/stack), d_norow (no row check), d_nochk (no v2p checks), d_all (none + int32 row loads).
# KV GPU tests + memcheck on fastk, then op_shapes KV page table alternating x2.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
R=/tmp/res; mkdir -p $R
tar xJf scratch/ab7.tar.xz -C scratch
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/gpu.txt
cp scratch/ab7/fastk.so sgl_meta/_C.abi3.so
timeout 200 python3 -m pytest tests/test_kv_read_table.py -q -p no:cacheprovider -m gpu -o addopts=-ra > $R/t_kv.log 2>&1; echo "kv tests rc=$? $(tail -1 $R/t_kv.log)"
OUT=$R SANITIZE_TIMEOUT=150 SANITIZE_K='test_kv_read_table and not hostile and not bad_inputs and not compile' timeout 160 bash scripts/sanitize.sh memcheck 2>&1 | tail -1
for r in 1 2; do
for v in main fastk d_trap d_norow d_nochk d_all; do
  cp scratch/ab7/$v.so sgl_meta/_C.abi3.so
  timeout 60 python3 benchmarks/op_shapes.py --only kv_read_page_table --no-eager --json $R/ops_${v}_$r.json > $R/ops_${v}_$r.log 2>&1
  echo "== $v $r"; grep gather $R/ops_${v}_$r.log | cut -c1-48,76-200
done; done
tar czf $OUT/res.tgz -C /tmp res
