#!/bin/bash
# Session 7 probe: where does the sm90 FAST kernel's main-loop time go?
set -u
cd "$(dirname "$0")/.."
tar -xJf tmpdev/variants.tar.xz
export PYTHONPATH=$PWD/bindings/python/src
mkdir -p tmpdev/base/lib && cp -a build-cuda/lib/libint8attn.so* tmpdev/base/lib/
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv | tee $OUT/gpu.txt
SH=square_8k_d128,flux_1024px,sdxl_l1_cfg,square_8k_d64
for rep in 1 2; do for v in base novload nosoftmax; do
  INT8ATTN_LIBRARY=$PWD/tmpdev/$v/lib/libint8attn.so python3 bench/ab_time.py fast $SH --kernel 2>&1 | tee -a $OUT/ab_probe.log
done; done
export LD_LIBRARY_PATH=$PWD/build-cuda/lib
for shape in square_4k_d128 sdxl_l1_cfg; do
  ncu --clock-control none -k regex:attention_sm90 -c 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section SourceCounters \
    --import-source no -f -o $OUT/prof_$shape build-cuda/bin/int8attn run --shape $shape --mode fast --repeats 1 > $OUT/ncu_run_$shape.txt 2>&1
  ncu -i $OUT/prof_$shape.ncu-rep > $OUT/ncu_$shape.txt 2>&1
  ncu -i $OUT/prof_$shape.ncu-rep --page source --print-source sass --csv > $OUT/sass_$shape.csv 2>&1
  rm -f $OUT/prof_$shape.ncu-rep
done
grep -h "fast\|cudnn" $OUT/ab_probe.log | tail -30
