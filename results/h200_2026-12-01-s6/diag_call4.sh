#!/usr/bin/env bash
# Session 6, call 4: the committed build after the fresh-user fixes: KV tests
# (drop-in integer arguments, reference at int64 extremes), KV bad inputs /
# hostile values / hypothesis, plugin new-op tests; then initcheck + racecheck of
# the KV tests and memcheck of the multi-set update tests, within the time left.
set -u
export PYTHONUNBUFFERED=1
R=/tmp/res; mkdir -p $R; T0=$(date +%s)
t() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/gpu.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/msgspec-*.whl > /dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site --python-version 3.11 --implementation cp --abi cp311 --platform manylinux_2_34_x86_64 --only-binary=:all: .whl/sglang-0.5.23-*.whl > /dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/apache_tvm_ffi-*.whl > /dev/null 2>&1
t "tests"
for spec in "tests/test_kv_read_table.py" "tests/reliability/test_props.py -k kv" "tests/reliability/test_hostile_values.py -k kv" "tests/reliability/test_bad_inputs.py -k kv" "tests/sglang_plugin/test_semantics_new_ops.py" "tests/test_bench_upstream.py"; do
  n=$(echo $spec | tr ' /' '__')
  ( PYTHONPATH=$PWD:/tmp/site timeout 200 python3 -m pytest $spec -q -p no:cacheprovider -m gpu -o addopts=-ra > $R/t_$n.log 2>&1; echo "$? $spec: $(tail -1 $R/t_$n.log)" >> $R/tests_rc.txt ) &
done; wait; cat $R/tests_rc.txt; grep -h -E "^(FAILED|ERROR)" $R/t_*.log | head
for tool in initcheck racecheck; do
  LEFT=$(( 560 - $(date +%s) + T0 )); t "$tool KV (left ${LEFT}s)"
  [ $LEFT -gt 60 ] && mkdir -p $R/$tool && PYTHONPATH=$PWD OUT=$R/$tool SANITIZE_TIMEOUT=$(( LEFT > 150 ? 150 : LEFT - 10 )) SANITIZE_K='test_kv_read_table and not hostile and not bad_inputs and not compile' bash scripts/sanitize.sh $tool 2>&1 | tail -1
done
LEFT=$(( 560 - $(date +%s) + T0 )); t "memcheck multi (left ${LEFT}s)"
[ $LEFT -gt 60 ] && mkdir -p $R/memcheck_multi && PYTHONPATH=$PWD OUT=$R/memcheck_multi SANITIZE_TIMEOUT=$(( LEFT - 10 )) SANITIZE_K='test_trtllm_mha_metadata_multi and not props and not hostile and not bad_inputs and not compile' bash scripts/sanitize.sh memcheck 2>&1 | tail -1
t done
tar czf $OUT/res.tgz -C /tmp res
