#!/bin/bash
# Session 7 run 39: the sm90a kernel's per-block-K softmax path. head = run-38 commit, kblock = this
# build; per-token K through both, per-block K through kblock; then the full GPU check of this build.
set -u
cd "$(dirname "$0")/.."
tar -xJf tmpdev/variants.tar.xz
export PYTHONPATH=$PWD/bindings/python/src
mkdir -p $OUT/ab
SH=square_8k_d128,flux_1024px,wan_480p_81f,square_8k_d64,sdxl_l1_cfg,sd3_cfg,cogvideox_cfg,sd15_l1_cfg
for rep in 1 2; do for m in fast balanced; do
  INT8ATTN_LIBRARY=$PWD/tmpdev/head/lib/libint8attn.so python3 bench/ab_time.py $m $SH >> $OUT/ab/ab.log 2>&1
  INT8ATTN_LIBRARY=$PWD/tmpdev/kblock/lib/libint8attn.so python3 bench/ab_time.py $m $SH >> $OUT/ab/ab.log 2>&1
  INT8ATTN_LIBRARY=$PWD/tmpdev/kblock/lib/libint8attn.so python3 bench/ab_time.py $m $SH --k-granularity block >> $OUT/ab/ab.log 2>&1
done; done
bash bench/gpu_check.sh --build-dir build-cuda > $OUT/gpu_check_stdout.log 2>&1
grep -i "status\|passed\|failed\|ERROR SUMMARY\|RACECHECK SUMMARY" $OUT/gpu_check.log | head -20
grep -B2 -A12 "PerBlock" $OUT/test_gpu_attention.log | grep -i "fail\|ok \]" | head
awk '{print $1,$2,$3,"e2e",$5}' $OUT/ab/ab.log | sort -k2,2 -k3,3 -k1,1 -s
rm -f $OUT/racecheck_probe_*.log $OUT/pytest_gpu.log
