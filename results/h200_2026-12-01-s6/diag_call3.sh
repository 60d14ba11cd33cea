#!/usr/bin/env bash
# Session 6, call 3: the committed build (main): the upstream bench with the
# bare gather in the KV rows (README table), op_shapes (all, paired timing),
# every GPU test, then memcheck of the update's test file with what time is left.
set -u
export PYTHONUNBUFFERED=1
R=/tmp/res; mkdir -p $R; T0=$(date +%s)
t() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/gpu.txt
python3 -c "import torch, triton, sys; print(torch.__version__, torch.version.cuda, triton.__version__, sys.version.split()[0])" >> $R/gpu.txt
git log --oneline -1 >> $R/gpu.txt 2>/dev/null
t "upstream bench"
OUT=$R UPSTREAM_ARGS=--no-cold-start timeout 300 bash scripts/upstream_bench.sh $R > $R/upstream_stdout.log 2>&1; echo rc=$?
grep -E "^\| (update|page|KV|DSA copy|DSA multi)" $R/upstream.md | cut -d'|' -f2,3,4,6,8 | head -14; grep -i "bare gather" $R/upstream.md
t "op_shapes"
PYTHONPATH=$PWD timeout 150 python3 benchmarks/op_shapes.py --no-eager --json $R/op_shapes.json > $R/op_shapes.log 2>&1; echo rc=$?; grep -E "gather|split" $R/op_shapes.log | cut -c1-48,76-220
t "gpu tests"
PYTHONPATH=$PWD:/tmp/site OUT=$R JOBS=8 timeout 200 bash scripts/gpu_tests.sh > $R/gpu_tests_summary.log 2>&1; echo rc=$?
grep -v ": .*passed\|no tests ran\|deselected in" $R/gpu_tests_summary.log | head; awk -F': ' '{print $2}' $R/gpu_tests_summary.log | grep -o "[0-9]* passed" | awk '{s+=$1} END {print "passed total", s}'
LEFT=$(( 570 - $(date +%s) + T0 ))
t "memcheck update tests (left ${LEFT}s)"
[ $LEFT -gt 60 ] && PYTHONPATH=$PWD OUT=$R SANITIZE_TIMEOUT=$(( LEFT - 15 )) SANITIZE_K='test_trtllm_mha_metadata and not multi and not props and not hostile and not bad_inputs and not compile' bash scripts/sanitize.sh memcheck 2>&1 | tail -2
t done
tar czf $OUT/res.tgz -C /tmp res
