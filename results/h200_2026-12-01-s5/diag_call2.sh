#!/usr/bin/env bash
# Session 5, call 2: columns per block at small grids. M = main + stream pow2,
# C = 1 column per thread in the update, builder, KV page table,
# D = C + 64-thread blocks in the builder and KV page table.
# The floor probe (bs1 + seqlens rows vs upstream) and op_shapes per variant, twice.
set -u
export PYTHONUNBUFFERED=1
R=/tmp/res2; mkdir -p $R
tar xJf scratch/ab.tar.xz -C scratch
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/msgspec-*.whl > /dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site --python-version 3.11 --implementation cp --abi cp311 --platform manylinux_2_34_x86_64 --only-binary=:all: .whl/sglang-0.5.23-*.whl > /dev/null 2>&1
for round in 1 2; do for v in M C D; do
  cp scratch/ab/$v.so sgl_meta/_C.abi3.so
  echo "=== $v round $round"
  OUT=$R N=200 PYTHONPATH=$PWD:/tmp/site timeout 100 python3 scratch/probe_floor.py /tmp/site > $R/floor_$v$round.log 2>&1; echo rc=$?
  head -10 $R/floor_$v$round.log | tail -9
  mv $R/probe_floor.json $R/floor_$v$round.json
  PYTHONPATH=$PWD timeout 70 python3 benchmarks/op_shapes.py --only bs1 --only ctx --only 'bs256x2048p64' --only 'bs256x8192p16' --no-eager --json $R/ops_$v$round.json > $R/ops_$v$round.log 2>&1; echo rc=$?
  grep -E "^(update|build|kv)" $R/ops_$v$round.log | cut -c1-48,76-200
done; done
tar czf $OUT/res2.tgz -C /tmp res2
