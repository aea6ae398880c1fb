#!/bin/bash
# run 49b: base (8b61461) vs vM (max |q| of phase B on the 16-bit pairs: abs by a mask,
# max.u16x2, one shuffle per channel pair) vs vS (vM + the K/V statistics' maxima and minima
# as HMNMX2 on the 16-bit pairs). GPU tests and a racecheck + memcheck of the small-problem
# test of vS first. It expects tmpdev/lib-{base,vM,vS}.tar.xz and tmpdev/test-bin.tar.xz.
cd "$(dirname "$0")/../../../.."
V="base vM vS"
for v in $V; do
  mkdir -p build-$v/lib && tar -xJf tmpdev/lib-$v.tar.xz -C build-$v/lib
  (cd build-$v/lib && ln -sf libint8attn.so.0.1.0 libint8attn.so.1 && ln -sf libint8attn.so.1 libint8attn.so)
done
tar -xJf tmpdev/test-bin.tar.xz -C tmpdev
export PYTHONPATH=bindings/python/src
T=$OUT/run49b_gpu_tests_vS.log
LD_LIBRARY_PATH=build-vS/lib timeout 200 tmpdev/test_gpu_attention > $T 2>&1; echo "gpu tests rc=$?" >> $T
LD_LIBRARY_PATH=build-vS/lib timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 tmpdev/test_gpu_attention --gtest_filter='*SmallProblems*' 2>&1 | tail -4 >> $T
LD_LIBRARY_PATH=build-vS/lib timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 tmpdev/test_gpu_attention --gtest_filter='*SmallProblems*' 2>&1 | tail -4 >> $T
grep -E "FAILED|PASSED|rc=|SUMMARY" $T | head -20
LOG=$OUT/run49b_stats_ab.log
SH=sd15_l3_cfg,sd15_l3_b1=1:8:8:256:256:160,sd15_l4=2:8:8:64:64:160,cross77=2:8:8:256:77:160,x96=2:8:8:256:256:96,d64_256=2:10:10:256:256:64,gqa_d128=1:32:8:100:200:128,d128_128=2:8:8:128:128:128
for rep in 1 2 3; do
  for v in $V; do
    INT8ATTN_LIBRARY=build-$v/lib/libint8attn.so python3 bench/ab_time.py fast $SH >> $LOG 2>&1
    INT8ATTN_LIBRARY=build-$v/lib/libint8attn.so python3 bench/ab_time.py balanced sd15_l3_cfg >> $LOG 2>&1
  done
done
grep -E " e2e " $LOG | awk '{k="-"; r="-"; for(i=1;i<=NF;i++) {if($i=="kernel") k=$(i+1); if($i=="rel") r=$(i+1)}; print $3, $2, $1, $5, k, r}' | sort -s -k1,2 | awk '{a[$1" "$2" "$3]=a[$1" "$2" "$3]" "$4"/"$6} END{for(x in a) print x, a[x]}' | sort
