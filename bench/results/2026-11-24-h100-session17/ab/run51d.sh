#!/bin/bash
# run 51d (probe, not kept): the cost of a second FP8 P·V MMA in the sm90 FAST kernel, the
# tensor-core half of "V hi + lo" (a second E4M3 MMA on V's rounding residual). The probe issues
# every P·V wgmma twice on the same V tile (the ones column doubles the row sums with it, so O
# stays right); it does not model V_lo's extra bytes (TMA, shared memory, L2, the preparation
# pass). Expects tmpdev/lib-{final,dup}.tar.xz. A/B only, three alternations.
cd "$(dirname "$0")/../../../.."
V="final dup"
for v in $V; do
  mkdir -p build-$v/lib && tar -xJf tmpdev/lib-$v.tar.xz -C build-$v/lib
  (cd build-$v/lib && ln -sf libint8attn.so.0.1.0 libint8attn.so.1 && ln -sf libint8attn.so.1 libint8attn.so)
done
export PYTHONPATH=bindings/python/src
LOG=$OUT/run51d_ab.log
SH=square_8k_d128,square_32k_d128,flux_1024px,wan_480p_81f,sd3_cfg,sdxl_l1_cfg,cogvideox_cfg
for rep in 1 2 3; do
  for v in $V; do
    INT8ATTN_LIBRARY=build-$v/lib/libint8attn.so python3 bench/ab_time.py fast $SH --kernel >> $LOG 2>&1
  done
done
grep -E " e2e " $LOG | awk '{k="-"; r="-"; for(i=1;i<=NF;i++) {if($i=="kernel") k=$(i+1); if($i=="rel") r=$(i+1)}; print $3, $2, $1, $5, k, r}' | sort -s -k1,2 | awk '{a[$1" "$2" "$3]=a[$1" "$2" "$3]" "$4"/"$5} END{for(x in a) print x, a[x]}' | sort
