#!/usr/bin/env bash
# Session 5, call 5: memcheck of the KV and page-table-builder tests on main's build.
set -u
R=/tmp/res5; mkdir -p $R
OUT=$R SANITIZE_TIMEOUT=200 SANITIZE_K='(test_kv_read_table or test_trtllm_mha_page_table) and not hostile and not bad_inputs and not compile' timeout 215 bash scripts/sanitize.sh memcheck 2>&1 | tail -2
tail -2 $R/sanitize-memcheck.log
tar czf $OUT/res5.tgz -C /tmp res5
