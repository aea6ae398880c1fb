#!/bin/bash
# run 44a: decode loop shrink A/B (base, vA loads, vB +f16 PV, vC +skip rescale), GPU tests of vC
cd "$(dirname "$0")/.."
for v in base vA vB vC vD; do
  mkdir -p build-$v/lib && tar -xJf tmpdev/lib-$v.tar.xz -C build-$v/lib
  (cd build-$v/lib && ln -sf libint8attn.so.0.1.0 libint8attn.so.1 && ln -sf libint8attn.so.1 libint8attn.so)
done
tar -xJf tmpdev/test-bin.tar.xz -C tmpdev
export PYTHONPATH=bindings/python/src
LOG=$OUT/run44a_ab.log
SH1=decode_b1_nk32k,decode_b16_nk32k,decode_b1_nk4k,gqa_rows4=4:32:8:4:4096:128
SH2=sd15_l3_cfg,d256_2k=1:8:8:2048:2048:256
for rep in 1 2; do
  for v in base vA vB vC vD; do
    INT8ATTN_LIBRARY=build-$v/lib/libint8attn.so python3 bench/ab_time.py fast $SH1 --kernel >> $LOG 2>&1
    INT8ATTN_LIBRARY=build-$v/lib/libint8attn.so python3 bench/ab_time.py balanced decode_b1_nk32k,decode_b16_nk32k --kernel >> $LOG 2>&1
    INT8ATTN_LIBRARY=build-$v/lib/libint8attn.so python3 bench/ab_time.py fast $SH2 >> $LOG 2>&1
  done
done
LD_LIBRARY_PATH=build-vD/lib timeout 300 tmpdev/test_gpu_attention > $OUT/run44a_gpu_tests_vD.log 2>&1; echo "gpu tests rc=$?" >> $OUT/run44a_gpu_tests_vD.log
tail -3 $OUT/run44a_gpu_tests_vD.log
grep -E "decode|gqa_rows4|sd15|d256" $LOG | awk "{print \$1,\$2,\$3,\$5,\$12}" | sort -k3,3 -k2,2 -k1,1
# ncu of vC's decode kernel (B=1, 32K, FAST cache)
if command -v ncu >/dev/null; then
  LD_LIBRARY_PATH=build-vD/lib ncu --clock-control none -k "regex:attention_kernel" -c 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section SourceCounters \
    --import-source no -f -o tmpdev/prof_vD tmpdev/int8attn run --shape decode_b1_nk32k --mode fast \
    --decode --repeats 1 > /dev/null 2>&1
  ncu -i tmpdev/prof_vD.ncu-rep > $OUT/run44a_ncu_decode_b1_vD.txt 2>&1
  ncu -i tmpdev/prof_vD.ncu-rep --page source --print-source sass --csv > tmpdev/sass.csv 2>&1
  xz -9 -c tmpdev/sass.csv > $OUT/run44a_sass_decode_b1_vD.csv.xz
fi
