#!/bin/bash
# run 44b: base vs vD (loads + f16 PV + skip rescale + MMA row sums) vs vE (+ Q pass skip + early first tile)
cd "$(dirname "$0")/.."
for v in base vD vE; do
  mkdir -p build-$v/lib && tar -xJf tmpdev/lib-$v.tar.xz -C build-$v/lib
  (cd build-$v/lib && ln -sf libint8attn.so.0.1.0 libint8attn.so.1 && ln -sf libint8attn.so.1 libint8attn.so)
done
tar -xJf tmpdev/test-bin.tar.xz -C tmpdev
export PYTHONPATH=bindings/python/src
LOG=$OUT/run44b_ab.log
SH1=decode_b1_nk32k,decode_b16_nk32k,decode_b1_nk4k,decode_b8_nk128k,decode_b64_nk4k,gqa_rows4=4:32:8:4:4096:128
SH2=sd15_l3_cfg,d256_2k=1:8:8:2048:2048:256,d160_4k=1:10:10:4096:4096:160,flux_1024px
for rep in 1 2 3; do
  for v in base vD vE; do
    INT8ATTN_LIBRARY=build-$v/lib/libint8attn.so python3 bench/ab_time.py fast $SH1 --kernel >> $LOG 2>&1
    INT8ATTN_LIBRARY=build-$v/lib/libint8attn.so python3 bench/ab_time.py balanced decode_b1_nk32k,decode_b16_nk32k --kernel >> $LOG 2>&1
    INT8ATTN_LIBRARY=build-$v/lib/libint8attn.so python3 bench/ab_time.py fast $SH2 >> $LOG 2>&1
  done
done
LD_LIBRARY_PATH=build-vE/lib timeout 300 tmpdev/test_gpu_attention > $OUT/run44b_gpu_tests_vE.log 2>&1; echo "gpu tests rc=$?" >> $OUT/run44b_gpu_tests_vE.log
tail -2 $OUT/run44b_gpu_tests_vE.log
if command -v ncu >/dev/null; then
  LD_LIBRARY_PATH=build-vE/lib ncu --clock-control none -k "regex:attention_kernel" -c 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section SourceCounters \
    --import-source no -f -o tmpdev/prof_vE tmpdev/int8attn run --shape decode_b1_nk32k --mode fast \
    --decode --repeats 1 > /dev/null 2>&1
  ncu -i tmpdev/prof_vE.ncu-rep > $OUT/run44b_ncu_decode_b1_vE.txt 2>&1
  ncu -i tmpdev/prof_vE.ncu-rep --page source --print-source sass --csv > tmpdev/sass.csv 2>&1
  xz -9 -c tmpdev/sass.csv > $OUT/run44b_sass_decode_b1_vE.csv.xz
fi
grep -E "decode|gqa|sd15|d256|d160|flux" $LOG | awk '{k="-"; for(i=1;i<=NF;i++) if($i=="kernel") k=$(i+1); print $3, $2, $1, $5, k}' | sort -s -k1,2 | awk '{a[$1" "$2" "$3]=a[$1" "$2" "$3]" "$4"/"$5} END{for(x in a) print x, a[x]}' | sort
