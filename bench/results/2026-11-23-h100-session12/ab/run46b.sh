#!/bin/bash
# run 46b: base (this session's code) vs vM2 / vM1 (at least 2 / 1 key tiles per split instead
# of 4): split-KV decode with small caches. It expects tmpdev/lib-{base,vM2,vM1}.tar.xz.
cd "$(dirname "$0")/.."
for v in base vM2 vM1; do
  mkdir -p build-$v/lib && tar -xJf tmpdev/lib-$v.tar.xz -C build-$v/lib
  (cd build-$v/lib && ln -sf libint8attn.so.0.1.0 libint8attn.so.1 && ln -sf libint8attn.so.1 libint8attn.so)
done
export PYTHONPATH=bindings/python/src
LOG=$OUT/run46b_ab.log
SH1=decode_b1_nk4k,b1_2k=1:32:8:1:2048:128,b1_8k=1:32:8:1:8192:128,b2_4k=2:32:8:1:4096:128,decode_b1_nk32k,gqa_rows4=4:32:8:4:4096:128,b1_4k_d64=1:32:8:1:4096:64
SH2=x1k80=1:8:8:1024:1024:80,d256_1k=1:8:8:1024:1024:256,xattn=1:10:10:256:4096:64
for rep in 1 2 3; do
  for v in base vM2 vM1; do
    L=build-$v/lib/libint8attn.so
    INT8ATTN_LIBRARY=$L python3 bench/ab_time.py fast $SH1 --kernel >> $LOG 2>&1
    INT8ATTN_LIBRARY=$L python3 bench/ab_time.py balanced decode_b1_nk4k,b1_8k=1:32:8:1:8192:128 --kernel >> $LOG 2>&1
    [ $rep -le 2 ] && INT8ATTN_LIBRARY=$L python3 bench/ab_time.py fast $SH2 >> $LOG 2>&1
  done
done
grep -E " e2e " $LOG | awk '{k="-"; for(i=1;i<=NF;i++) if($i=="kernel") k=$(i+1); print $3, $2, $1, $5, k}' | sort -s -k1,2 | awk '{a[$1" "$2" "$3]=a[$1" "$2" "$3]" "$4"/"$5} END{for(x in a) print x, a[x]}' | sort
