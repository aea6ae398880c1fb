#!/bin/bash
# run 51b: rv (run 51a) vs sv0 (the statistics sent before V: V no longer queues ahead of them
# in the copy engine) vs sv16 (16 rows of V before the statistics, the rest after).
# It expects tmpdev/lib-{new,sv0,sv16}.tar.xz and tmpdev/test-bin.tar.xz. The whole GPU test binary
# and racecheck, synccheck and memcheck of the small-problem and multiplier tests on sv0 first,
# an ncu profile of sv0's sd15_l3 kernel, then the A/B (four alternations).
cd "$(dirname "$0")/../../../.."
V="new sv0 sv16"
for v in $V; do
  mkdir -p build-$v/lib && tar -xJf tmpdev/lib-$v.tar.xz -C build-$v/lib
  (cd build-$v/lib && ln -sf libint8attn.so.0.1.0 libint8attn.so.1 && ln -sf libint8attn.so.1 libint8attn.so)
done
tar -xJf tmpdev/test-bin.tar.xz -C tmpdev
export PYTHONPATH=bindings/python/src
T=$OUT/run51b_gpu_tests_sv0.log
F='*SmallProblems*:*ScaleMultiplier*'
LD_LIBRARY_PATH=build-sv0/lib timeout 200 tmpdev/test_gpu_attention > $T 2>&1; echo "gpu tests rc=$?" >> $T
for tool in racecheck synccheck memcheck; do
  LD_LIBRARY_PATH=build-sv0/lib timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 tmpdev/test_gpu_attention --gtest_filter="$F" 2>&1 | tail -4 >> $T
done
grep -E "FAILED|PASSED|rc=|SUMMARY" $T | head -20
grep -E "small" $T | grep -iE "failure|expected" | head -10
P=$OUT/run51b_ncu_sv0
INT8ATTN_LIBRARY=build-sv0/lib/libint8attn.so timeout 150 ncu --cache-control none --clock-control none \
  -k regex:attention_small -s 1 -c 1 --section WarpStateStats --section SourceCounters --import-source no \
  -f -o $P python3 bench/profile_forward.py sd15_l3_cfg fast > ${P}_run.txt 2>&1
ncu -i $P.ncu-rep --page source --print-source sass --csv > ${P}_sass.csv 2>/dev/null
python3 bench/sass_phases.py ${P}_sass.csv --min-share 0.5 > ${P}_phases.txt 2>&1
rm -f $P.ncu-rep; xz -f ${P}_sass.csv
cut -c1-110 ${P}_phases.txt | head -30
LOG=$OUT/run51b_ab.log
SH=sd15_l3_cfg,sd15_l3_b1=1:8:8:256:256:160,sd15_l4=2:8:8:64:64:160,cross77=2:8:8:256:77:160,x96=2:8:8:256:256:96,d64_256=2:10:10:256:256:64,gqa_d128=1:32:8:100:200:128,d128_128=2:8:8:128:128:128
for rep in 1 2 3 4; do
  for v in $V; do
    INT8ATTN_LIBRARY=build-$v/lib/libint8attn.so python3 bench/ab_time.py fast $SH >> $LOG 2>&1
    INT8ATTN_LIBRARY=build-$v/lib/libint8attn.so python3 bench/ab_time.py balanced sd15_l3_cfg >> $LOG 2>&1
  done
done
grep -E " e2e " $LOG | awk '{k="-"; r="-"; for(i=1;i<=NF;i++) {if($i=="kernel") k=$(i+1); if($i=="rel") r=$(i+1)}; print $3, $2, $1, $5, k, r}' | sort -s -k1,2 | awk '{a[$1" "$2" "$3]=a[$1" "$2" "$3]" "$4"/"$6} END{for(x in a) print x, a[x]}' | sort
