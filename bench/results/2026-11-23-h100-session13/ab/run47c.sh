#!/bin/bash
# run 47c: vQ (8ea16f8, run 47b) vs vC (vQ + each CTA pushes its statistics into every CTA of
# the cluster before the barrier, read locally after it). GPU tests and a racecheck + memcheck
# of the small-problem test of vC first. It expects tmpdev/lib-{vQ,vC}.tar.xz and
# tmpdev/test-bin.tar.xz.
cd "$(dirname "$0")/../../../.."
for v in vQ vC; do
  mkdir -p build-$v/lib && tar -xJf tmpdev/lib-$v.tar.xz -C build-$v/lib
  (cd build-$v/lib && ln -sf libint8attn.so.0.1.0 libint8attn.so.1 && ln -sf libint8attn.so.1 libint8attn.so)
done
tar -xJf tmpdev/test-bin.tar.xz -C tmpdev
export PYTHONPATH=bindings/python/src
T=$OUT/run47c_gpu_tests_vC.log
LD_LIBRARY_PATH=build-vC/lib timeout 240 tmpdev/test_gpu_attention > $T 2>&1; echo "gpu tests rc=$?" >> $T
LD_LIBRARY_PATH=build-vC/lib compute-sanitizer --tool racecheck --error-exitcode 9 tmpdev/test_gpu_attention --gtest_filter='*SmallProblems*' 2>&1 | tail -4 >> $T
LD_LIBRARY_PATH=build-vC/lib compute-sanitizer --tool memcheck --error-exitcode 9 tmpdev/test_gpu_attention --gtest_filter='*SmallProblems*' 2>&1 | tail -4 >> $T
grep -E "FAILED|PASSED|rc=|SUMMARY" $T | head -20
LOG=$OUT/run47c_stats_push_ab.log
SH3=sd15_l3_cfg,x96=2:8:8:256:256:96,sd15_l3_b1=1:8:8:256:256:160,sd15_l4=2:8:8:64:64:160,cross77=2:8:8:256:77:160,d64_256=2:10:10:256:256:64,gqa_d128=1:32:8:100:200:128,d128_128=2:8:8:128:128:128
for rep in 1 2 3; do
  for v in vQ vC; do
    L=build-$v/lib/libint8attn.so
    INT8ATTN_LIBRARY=$L python3 bench/ab_time.py fast $SH3 >> $LOG 2>&1
    INT8ATTN_LIBRARY=$L python3 bench/ab_time.py balanced sd15_l3_cfg >> $LOG 2>&1
  done
done
grep -E " e2e " $LOG | awk '{k="-"; for(i=1;i<=NF;i++) if($i=="rel") k=$(i+1); print $3, $2, $1, $5, k}' | sort -s -k1,2 | awk '{a[$1" "$2" "$3]=a[$1" "$2" "$3]" "$4"/"$5} END{for(x in a) print x, a[x]}' | sort
