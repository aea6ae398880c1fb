#!/bin/bash
# run 45a: vF (60d0f9f) vs vG (three stages in the 1-warp FAST decode CTAs)
cd "$(dirname "$0")/.."
for v in vF vG; do
  mkdir -p build-$v/lib && tar -xJf tmpdev/lib-$v.tar.xz -C build-$v/lib
  (cd build-$v/lib && ln -sf libint8attn.so.0.1.0 libint8attn.so.1 && ln -sf libint8attn.so.1 libint8attn.so)
done
tar -xJf tmpdev/test-bin.tar.xz -C tmpdev
export PYTHONPATH=bindings/python/src
LOG=$OUT/run45a_ab.log
SH1=decode_b1_nk32k,decode_b16_nk32k,decode_b1_nk4k,decode_b8_nk128k,decode_b64_nk4k,gqa_rows4=4:32:8:4:4096:128
SH2=sd15_l3_cfg,d256_2k=1:8:8:2048:2048:256
for rep in 1 2 3; do
  for v in vF vG; do
    INT8ATTN_LIBRARY=build-$v/lib/libint8attn.so python3 bench/ab_time.py fast $SH1 --kernel >> $LOG 2>&1
    INT8ATTN_LIBRARY=build-$v/lib/libint8attn.so python3 bench/ab_time.py balanced decode_b1_nk32k,decode_b16_nk32k --kernel >> $LOG 2>&1
    INT8ATTN_LIBRARY=build-$v/lib/libint8attn.so python3 bench/ab_time.py fast $SH2 >> $LOG 2>&1; INT8ATTN_LIBRARY=build-$v/lib/libint8attn.so python3 bench/ab_time.py balanced $SH2 >> $LOG 2>&1
  done
done
LD_LIBRARY_PATH=build-vG/lib timeout 300 tmpdev/test_gpu_attention > $OUT/run45a_gpu_tests_vG.log 2>&1; echo "gpu tests rc=$?" >> $OUT/run45a_gpu_tests_vG.log
tail -2 $OUT/run45a_gpu_tests_vG.log
grep -E "decode|gqa|sd15|d256|d64|cross" $LOG | awk '{k="-"; for(i=1;i<=NF;i++) if($i=="kernel") k=$(i+1); print $3, $2, $1, $5, k}' | sort -s -k1,2 | awk '{a[$1" "$2" "$3]=a[$1" "$2" "$3]" "$4"/"$5} END{for(x in a) print x, a[x]}' | sort
