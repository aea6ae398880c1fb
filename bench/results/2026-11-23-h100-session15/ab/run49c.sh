#!/bin/bash
# run 49c (diagnostic): vS (run 49b) vs d6 (the second cluster barrier, "my incoming copies landed",
# arrives .relaxed: no MEMBAR.ALL.GPU before it) vs d5 (d6 + the first barrier relaxed too: wrong
# memory ordering, timing only). It expects tmpdev/lib-{vS,d5,d6}.tar.xz and test-bin.
# GPU tests of d6 first.
cd "$(dirname "$0")/../../../.."
V="vS d6 d5"
for v in $V; do
  mkdir -p build-$v/lib && tar -xJf tmpdev/lib-$v.tar.xz -C build-$v/lib
  (cd build-$v/lib && ln -sf libint8attn.so.0.1.0 libint8attn.so.1 && ln -sf libint8attn.so.1 libint8attn.so)
done
tar -xJf tmpdev/test-bin.tar.xz -C tmpdev
export PYTHONPATH=bindings/python/src
T=$OUT/run49c_gpu_tests_d6.log
LD_LIBRARY_PATH=build-d6/lib timeout 200 tmpdev/test_gpu_attention > $T 2>&1; echo "gpu tests rc=$?" >> $T
LD_LIBRARY_PATH=build-d6/lib timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 tmpdev/test_gpu_attention --gtest_filter='*SmallProblems*' 2>&1 | tail -4 >> $T
LD_LIBRARY_PATH=build-d6/lib timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 tmpdev/test_gpu_attention --gtest_filter='*SmallProblems*' 2>&1 | tail -4 >> $T
grep -E "FAILED|PASSED|rc=|SUMMARY" $T | head -20
LOG=$OUT/run49c_barriers_ab.log
SH=sd15_l3_cfg,sd15_l3_b1=1:8:8:256:256:160,sd15_l4=2:8:8:64:64:160,cross77=2:8:8:256:77:160,x96=2:8:8:256:256:96,d64_256=2:10:10:256:256:64,gqa_d128=1:32:8:100:200:128,d128_128=2:8:8:128:128:128
for rep in 1 2 3; do
  for v in $V; do
    INT8ATTN_LIBRARY=build-$v/lib/libint8attn.so python3 bench/ab_time.py fast $SH >> $LOG 2>&1
    INT8ATTN_LIBRARY=build-$v/lib/libint8attn.so python3 bench/ab_time.py balanced sd15_l3_cfg >> $LOG 2>&1
  done
done
grep -E " e2e " $LOG | awk '{k="-"; r="-"; for(i=1;i<=NF;i++) {if($i=="kernel") k=$(i+1); if($i=="rel") r=$(i+1)}; print $3, $2, $1, $5, k, r}' | sort -s -k1,2 | awk '{a[$1" "$2" "$3]=a[$1" "$2" "$3]" "$4"/"$6} END{for(x in a) print x, a[x]}' | sort
