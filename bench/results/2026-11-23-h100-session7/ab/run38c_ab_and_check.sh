#!/bin/bash
# Session 7 run 38c: key scales loaded before the Q·Kᵀ wait with two consumers (final) against the run-37 commit (head);
# then the full GPU check of the final code.
set -u
cd "$(dirname "$0")/.."
tar -xJf tmpdev/variants.tar.xz
export PYTHONPATH=$PWD/bindings/python/src
mkdir -p $OUT/ab
SH=square_8k_d128,flux_1024px,wan_480p_81f,square_8k_d64,sdxl_l1_cfg,sd3_cfg,sd15_l3_cfg
for rep in 1 2; do for v in head final; do
  INT8ATTN_LIBRARY=$PWD/tmpdev/$v/lib/libint8attn.so python3 bench/ab_time.py fast $SH --kernel >> $OUT/ab/ab_fast.log 2>&1
  INT8ATTN_LIBRARY=$PWD/tmpdev/$v/lib/libint8attn.so python3 bench/ab_time.py balanced square_8k_d128,flux_1024px,sdxl_l1_cfg,sd15_l3_cfg --kernel >> $OUT/ab/ab_balanced.log 2>&1
done; done
bash bench/gpu_check.sh --build-dir build-cuda > $OUT/gpu_check_stdout.log 2>&1
grep -i "status\|passed\|failed\|ERROR SUMMARY\|RACECHECK SUMMARY" $OUT/gpu_check.log | head -20
cat $OUT/ab/ab_fast.log $OUT/ab/ab_balanced.log | awk '{print $1,$2,$3,"e2e",$5,"cudnn",$10,"kern",$13}' | sort -k2,2 -k3,3 -k1,1 -s
rm -f $OUT/racecheck_probe_*.log
