#!/bin/bash
# run 51c: how much of V to send before the statistics. sv16 (run 51b: 16 rows) against a byte
# budget for the early part, rows = budget / (vp·(C − 1)): 12, 20, 28 and 40 KiB. Expects
# tmpdev/lib-{sv16,b12288,b20480,b28672,b40960}.tar.xz. A/B only (three alternations).
cd "$(dirname "$0")/../../../.."
V="sv16 b12288 b20480 b28672 b40960"
for v in $V; do
  mkdir -p build-$v/lib && tar -xJf tmpdev/lib-$v.tar.xz -C build-$v/lib
  (cd build-$v/lib && ln -sf libint8attn.so.0.1.0 libint8attn.so.1 && ln -sf libint8attn.so.1 libint8attn.so)
done
export PYTHONPATH=bindings/python/src
LOG=$OUT/run51c_ab.log
SH=sd15_l3_cfg,sd15_l3_b1=1:8:8:256:256:160,sd15_l4=2:8:8:64:64:160,cross77=2:8:8:256:77:160,x96=2:8:8:256:256:96,d64_256=2:10:10:256:256:64,gqa_d128=1:32:8:100:200:128,d128_128=2:8:8:128:128:128
for rep in 1 2 3; do
  for v in $V; do
    INT8ATTN_LIBRARY=build-$v/lib/libint8attn.so python3 bench/ab_time.py fast $SH >> $LOG 2>&1
  done
done
grep -E " e2e " $LOG | awk '{k="-"; r="-"; for(i=1;i<=NF;i++) {if($i=="kernel") k=$(i+1); if($i=="rel") r=$(i+1)}; print $3, $2, $1, $5, k, r}' | sort -s -k1,2 | awk '{a[$1" "$2" "$3]=a[$1" "$2" "$3]" "$4} END{for(x in a) print x, a[x]}' | sort
