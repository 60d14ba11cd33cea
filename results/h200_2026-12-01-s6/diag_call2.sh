#!/usr/bin/env bash
# Session 6, call 2: "new" = fastk + typed row scalars + short live-column math.
# Tests (KV + plugin) and memcheck on new; bare/bare calibration of the paired
# timing; op_shapes (paired, alternating replays) for main / fastk / new / d_all x2.
set -u
export PYTHONUNBUFFERED=1
R=/tmp/res; mkdir -p $R; T0=$(date +%s)
t() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
tar xJf scratch/ab8.tar.xz -C scratch
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/gpu.txt
python3 -c "import torch, triton, sys; print(torch.__version__, torch.version.cuda, triton.__version__, sys.version.split()[0])" >> $R/gpu.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/msgspec-*.whl > /dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site --python-version 3.11 --implementation cp --abi cp311 --platform manylinux_2_34_x86_64 --only-binary=:all: .whl/sglang-0.5.23-*.whl > /dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/apache_tvm_ffi-*.whl > /dev/null 2>&1
cp scratch/ab8/new.so sgl_meta/_C.abi3.so
t "tests"
for spec in "tests/test_kv_read_table.py" "tests/reliability/test_props.py -k kv" "tests/reliability/test_hostile_values.py -k kv" "tests/sglang_plugin/test_unified_graph.py" "tests/sglang_plugin/test_semantics_new_ops.py"; do
  n=$(echo $spec | tr ' /' '__')
  ( PYTHONPATH=$PWD:/tmp/site timeout 170 python3 -m pytest $spec -q -p no:cacheprovider -m gpu -o addopts=-ra > $R/t_$n.log 2>&1; echo "$? $spec: $(tail -1 $R/t_$n.log)" >> $R/tests_rc.txt ) &
done; wait; cat $R/tests_rc.txt; grep -h -E "^(FAILED|ERROR)" $R/t_*.log | head
t "memcheck"
PYTHONPATH=$PWD OUT=$R SANITIZE_TIMEOUT=150 SANITIZE_K='test_kv_read_table and not hostile and not bad_inputs and not compile' timeout 160 bash scripts/sanitize.sh memcheck 2>&1 | tail -1
t "calibration"
PYTHONPATH=$PWD timeout 60 python3 scratch/paired_self.py > $R/paired_self.log 2>&1; cat $R/paired_self.log
t "op_shapes A/B"
for r in 1 2; do
for v in main fastk new d_all; do
  cp scratch/ab8/$v.so sgl_meta/_C.abi3.so
  PYTHONPATH=$PWD timeout 80 python3 benchmarks/op_shapes.py --only kv_read_page_table --no-eager --json $R/ops_${v}_$r.json > $R/ops_${v}_$r.log 2>&1
  echo "== $v $r"; grep gather $R/ops_${v}_$r.log | cut -c1-48,76-200
done; done
t "new: stream + unified step"
cp scratch/ab8/new.so sgl_meta/_C.abi3.so
PYTHONPATH=$PWD timeout 80 python3 benchmarks/op_shapes.py --only kv_read_token_stream --only unified --no-eager --json $R/ops_new_rest.json > $R/ops_new_rest.log 2>&1; grep -E "gather|split" $R/ops_new_rest.log | cut -c1-48,76-200
t done
tar czf $OUT/res.tgz -C /tmp res
