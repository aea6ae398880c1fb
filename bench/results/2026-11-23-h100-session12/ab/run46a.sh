#!/bin/bash
# run 46a: base (645d26c) vs vP (programmatic dependent launch between our kernels) vs vS (vP +
# slimmer quantization passes: FMA-folded constants, magic-number INT8 rounding, absmax tree).
# It expects tmpdev/lib-{base,vP,vS}.tar.xz (stripped libraries) and tmpdev/test-bin.tar.xz.
cd "$(dirname "$0")/.."
for v in base vP vS; do
  mkdir -p build-$v/lib && tar -xJf tmpdev/lib-$v.tar.xz -C build-$v/lib
  (cd build-$v/lib && ln -sf libint8attn.so.0.1.0 libint8attn.so.1 && ln -sf libint8attn.so.1 libint8attn.so)
done
tar -xJf tmpdev/test-bin.tar.xz -C tmpdev
export PYTHONPATH=bindings/python/src
LOG=$OUT/run46a_ab.log
SH1=decode_b1_nk32k,decode_b16_nk32k,decode_b1_nk4k,gqa_rows4=4:32:8:4:4096:128
SH2=flux_1024px,sdxl_l1_cfg,sd15_l1_cfg,square_1k_d128
SH3=sd15_l3_cfg,sd15_l4=2:8:8:64:64:160,cross77=2:8:8:256:77:160,d64_256=2:10:10:256:256:64,gqa_d128=1:32:8:100:200:128
for rep in 1 2; do
  for v in base vP vS; do
    L=build-$v/lib/libint8attn.so
    INT8ATTN_LIBRARY=$L python3 bench/ab_time.py fast $SH1 --kernel >> $LOG 2>&1
    INT8ATTN_LIBRARY=$L python3 bench/ab_time.py balanced decode_b1_nk32k --kernel >> $LOG 2>&1
    INT8ATTN_LIBRARY=$L python3 bench/ab_time.py fast $SH2 >> $LOG 2>&1
    INT8ATTN_LIBRARY=$L python3 bench/ab_time.py fast $SH3 >> $LOG 2>&1
    INT8ATTN_LIBRARY=$L python3 bench/ab_time.py balanced sd15_l3_cfg,d64_256=2:10:10:256:256:64 >> $LOG 2>&1
  done
done
LD_LIBRARY_PATH=build-vS/lib timeout 300 tmpdev/test_gpu_attention > $OUT/run46a_gpu_tests_vS.log 2>&1; echo "gpu tests rc=$?" >> $OUT/run46a_gpu_tests_vS.log
tail -2 $OUT/run46a_gpu_tests_vS.log
grep -E " e2e " $LOG | awk '{k="-"; for(i=1;i<=NF;i++) if($i=="kernel") k=$(i+1); print $3, $2, $1, $5, k}' | sort -s -k1,2 | awk '{a[$1" "$2" "$3]=a[$1" "$2" "$3]" "$4"/"$5} END{for(x in a) print x, a[x]}' | sort
