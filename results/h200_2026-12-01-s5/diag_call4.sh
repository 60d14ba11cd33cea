#!/usr/bin/env bash
# Session 5, call 4: main's build (one column per thread, stream pow2, KV short
# live-column path): the KV GPU tests, op_shapes (all), the small-row floor
# probe, the upstream bench with DSA (README table), memcheck of the changed kernels.
set -u
export PYTHONUNBUFFERED=1
R=/tmp/res4; mkdir -p $R
T0=$(date +%s); t() { echo "[t=$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/gpu.txt
python3 -c "import torch, triton, sys; print(torch.__version__, torch.version.cuda, triton.__version__, sys.version.split()[0])" >> $R/gpu.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/msgspec-*.whl > /dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site --python-version 3.11 --implementation cp --abi cp311 --platform manylinux_2_34_x86_64 --only-binary=:all: .whl/sglang-0.5.23-*.whl > /dev/null 2>&1
t "kv tests"
for spec in "tests/test_kv_read_table.py" "tests/reliability/test_props.py -k kv" "tests/reliability/test_hostile_values.py -k kv" "tests/sglang_plugin/test_unified_graph.py" "tests/sglang_plugin/test_semantics_new_ops.py"; do
  n=$(echo $spec | tr ' /' '__')
  ( PYTHONPATH=$PWD:/tmp/site timeout 150 python3 -m pytest $spec -q -p no:cacheprovider -m gpu -o addopts=-ra > $R/t_$n.log 2>&1; echo "$? $spec: $(tail -1 $R/t_$n.log)" >> $R/tests_rc.txt ) &
done; wait; cat $R/tests_rc.txt; grep -h -E "^(FAILED|ERROR)" $R/t_*.log | head
t "op_shapes"
PYTHONPATH=$PWD timeout 100 python3 benchmarks/op_shapes.py --no-eager --json $R/op_shapes.json > $R/op_shapes.log 2>&1; echo rc=$?; grep -E "gather|split|bs1x" $R/op_shapes.log | cut -c1-48,76-200
t "upstream bench"
OUT=$R UPSTREAM_ARGS=--no-cold-start timeout 330 bash scripts/upstream_bench.sh $R > $R/upstream_stdout.log 2>&1; echo rc=$?; grep -E "^\| (update|page|KV|DSA copy|DSA multi)" $R/upstream.md | cut -d'|' -f2,3,4,6 | head -14
t "floor probe"
OUT=$R PYTHONPATH=$PWD:/tmp/site timeout 60 python3 scratch/probe_floor.py /tmp/site > $R/probe_floor.log 2>&1; echo rc=$?; head -10 $R/probe_floor.log
t "memcheck"
LEFT=$(( 570 - $(date +%s) + T0 ))
echo "left ${LEFT}s"
[ $LEFT -gt 60 ] && OUT=$R SANITIZE_TIMEOUT=$(( LEFT - 15 )) SANITIZE_K='(kv_read or trtllm_mha_page_table or test_trtllm_mha_metadata) and not props and not hostile and not bad_inputs and not compile' bash scripts/sanitize.sh memcheck 2>&1 | tail -2
t done
tar czf $OUT/res4.tgz -C /tmp res4
