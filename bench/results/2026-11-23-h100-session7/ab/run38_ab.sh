#!/bin/bash
# Session 7 run 38: part of FAST's exponentials on the FMA pipe; key scales loaded before the Q·Kᵀ wait.
set -u
cd "$(dirname "$0")/.."
tar -xJf tmpdev/variants.tar.xz
export PYTHONPATH=$PWD/bindings/python/src
V="head poly4 poly2 hoist hoistpoly4"
for v in $V; do ln -sf libint8attn.so tmpdev/$v/lib/libint8attn.so.1; done
for v in poly2 hoistpoly4; do
  echo "$v: $(LD_LIBRARY_PATH=$PWD/tmpdev/$v/lib build-cuda/bin/test_gpu_attention --gtest_brief=1 2>&1 | tail -2 | tr '\n' ' ')" | tee -a $OUT/tests.log
done
for v in $V; do for s in flux_1024px square_4k_d64; do
  echo "$v $(LD_LIBRARY_PATH=$PWD/tmpdev/$v/lib build-cuda/bin/int8attn run --shape $s --mode fast 2>&1 | grep 'cuda    FAST')" | tee -a $OUT/accuracy.log
done; done
SH=square_8k_d128,flux_1024px,wan_480p_81f,square_8k_d64,sdxl_l1_cfg,sd3_cfg,cogvideox_cfg
for rep in 1 2; do for v in $V; do
  INT8ATTN_LIBRARY=$PWD/tmpdev/$v/lib/libint8attn.so python3 bench/ab_time.py fast $SH --kernel >> $OUT/ab_fast.log 2>&1
done; done
awk '{print $1,$3,$13}' $OUT/ab_fast.log | sort -k2,2 -k1,1 -s
