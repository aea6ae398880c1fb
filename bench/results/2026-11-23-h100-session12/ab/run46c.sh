#!/bin/bash
# run 46c: base (this session's first commit) vs vR (the split rule of run 46c: decode CTAs split
# down to one key tile, past 32 splits at least 4 tiles each), then the full check of vR
# (build-final). It expects tmpdev/lib-{base,vR}.tar.xz.
cd "$(dirname "$0")/.."
for v in base vR; do
  mkdir -p build-$v/lib && tar -xJf tmpdev/lib-$v.tar.xz -C build-$v/lib
  (cd build-$v/lib && ln -sf libint8attn.so.0.1.0 libint8attn.so.1 && ln -sf libint8attn.so.1 libint8attn.so)
done
export PYTHONPATH=bindings/python/src
LOG=$OUT/run46c_ab.log
SH1=decode_b1_nk4k,b1_2k=1:32:8:1:2048:128,b1_8k=1:32:8:1:8192:128,b1_16k=1:32:8:1:16384:128,b2_4k=2:32:8:1:4096:128,decode_b1_nk32k,b1_4k_d64=1:32:8:1:4096:64,b1_1k=1:32:8:1:1024:128
for rep in 1 2 3; do
  for v in base vR; do
    L=build-$v/lib/libint8attn.so
    INT8ATTN_LIBRARY=$L python3 bench/ab_time.py fast $SH1 --kernel >> $LOG 2>&1
    INT8ATTN_LIBRARY=$L python3 bench/ab_time.py balanced decode_b1_nk4k,b1_16k=1:32:8:1:16384:128 --kernel >> $LOG 2>&1
  done
done
grep -E " e2e " $LOG | awk '{k="-"; for(i=1;i<=NF;i++) if($i=="kernel") k=$(i+1); print $3, $2, $1, $5, k}' | sort -s -k1,2 | awk '{a[$1" "$2" "$3]=a[$1" "$2" "$3]" "$4"/"$5} END{for(x in a) print x, a[x]}' | sort
mkdir -p $OUT/full
OUT=$OUT/full bash bench/gpu_check.sh --build-dir build-final > /dev/null 2>&1
rm -f $OUT/full/racecheck_probe_*.log $OUT/full/racecheck.log $OUT/full/test_gpu_attention.log
grep -E "PASSED|FAILED|ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" $OUT/full/gpu_check.log | head -12
grep -E "^\| (decode|sd15_l3|flux|square_8k_d128)" $OUT/full/bench_table.md | cut -c1-160
