#!/bin/bash
# Session 7 run 40: two-instruction scores also for FAST with two consumers, now that the key
# scales arrive before the Q·Kᵀ wait (head = e355467, twoop = that change).
set -u
cd "$(dirname "$0")/.."
tar -xJf tmpdev/variants.tar.xz
export PYTHONPATH=$PWD/bindings/python/src
SH=square_8k_d128,flux_1024px,wan_480p_81f,sd15_l3_cfg,sq8k_d160=2:16:16:8192:8192:160
for rep in 1 2 3; do for v in head twoop; do
  INT8ATTN_LIBRARY=$PWD/tmpdev/$v/lib/libint8attn.so python3 bench/ab_time.py fast $SH --kernel >> $OUT/ab.log 2>&1
done; done
awk '{print $1,$3,"e2e",$5,"kern",$13}' $OUT/ab.log | sort -k2,2 -k1,1 -s
