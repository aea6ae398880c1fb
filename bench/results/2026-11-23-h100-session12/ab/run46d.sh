#!/bin/bash
# run 46d: base (8e5cd90: past 32 splits at least 4 key tiles each) vs vT8 (at least 8), B=1
# decode between 8K and 32K keys. It expects tmpdev/lib-{base,vT8}.tar.xz.
cd "$(dirname "$0")/.."
for v in base vT8; do
  mkdir -p build-$v/lib && tar -xJf tmpdev/lib-$v.tar.xz -C build-$v/lib
  (cd build-$v/lib && ln -sf libint8attn.so.0.1.0 libint8attn.so.1 && ln -sf libint8attn.so.1 libint8attn.so)
done
export PYTHONPATH=bindings/python/src
LOG=$OUT/run46d_ab.log
SH=b1_12k=1:32:8:1:12288:128,b1_16k=1:32:8:1:16384:128,b1_24k=1:32:8:1:24576:128,decode_b1_nk32k
for rep in 1 2 3; do
  for v in base vT8; do
    INT8ATTN_LIBRARY=build-$v/lib/libint8attn.so python3 bench/ab_time.py fast $SH --kernel >> $LOG 2>&1
    INT8ATTN_LIBRARY=build-$v/lib/libint8attn.so python3 bench/ab_time.py balanced b1_16k=1:32:8:1:16384:128 --kernel >> $LOG 2>&1
  done
done
grep -E " e2e " $LOG | awk '{k="-"; for(i=1;i<=NF;i++) if($i=="kernel") k=$(i+1); print $3, $2, $1, $5, k}' | sort -s -k1,2 | awk '{a[$1" "$2" "$3]=a[$1" "$2" "$3]" "$4"/"$5} END{for(x in a) print x, a[x]}' | sort
