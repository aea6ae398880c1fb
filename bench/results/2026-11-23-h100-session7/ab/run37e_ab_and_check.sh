#!/bin/bash
# Session 7 run 37e: A/B of the final kernel against HEAD, then the full GPU check of the final code.
set -u
cd "$(dirname "$0")/.."
tar -xJf tmpdev/variants.tar.xz
export PYTHONPATH=$PWD/bindings/python/src
mkdir -p $OUT/ab
SH=square_8k_d128,flux_1024px,sdxl_l1_cfg,square_8k_d64,sd3_cfg,sd15_l1_cfg,cogvideox_cfg,wan_480p_81f
for rep in 1 2; do for v in base final; do
  INT8ATTN_LIBRARY=$PWD/tmpdev/$v/lib/libint8attn.so python3 bench/ab_time.py fast $SH --kernel >> $OUT/ab/ab_fast.log 2>&1
  INT8ATTN_LIBRARY=$PWD/tmpdev/$v/lib/libint8attn.so python3 bench/ab_time.py balanced square_8k_d128,flux_1024px,sdxl_l1_cfg,square_8k_d64 --kernel >> $OUT/ab/ab_balanced.log 2>&1
done; done
bash bench/gpu_check.sh --build-dir build-cuda > $OUT/gpu_check_stdout.log 2>&1
grep -A3 "GPU tests" $OUT/gpu_check.log | head; grep -i "status\|passed\|failed\|ERROR SUMMARY\|RACECHECK SUMMARY" $OUT/gpu_check.log | head -20
cat $OUT/ab/ab_fast.log $OUT/ab/ab_balanced.log | awk '{print $1,$2,$3,"e2e",$5,"cudnn",$10,"kern",$13}' | sort -k2,2 -k3,3 -k1,1 -s
tail -32 $OUT/bench_table.md | cut -d'|' -f2,7,8,10 
