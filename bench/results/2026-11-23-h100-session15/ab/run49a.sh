#!/bin/bash
# run 49a (diagnostic): what the small kernel's key loop spends at sd15_l3. Builds of 8b61461
# with INT8ATTN_SMALL_DIAG (attention_small_kernel.cuh; wrong outputs, timing only):
# d1 no P·V MMAs, d2 no V ldmatrix (MMAs on register values), d3 no K ldmatrix, d4 = d1 + d2.
# Then an ncu pass of the base kernel (tensor pipe, shared-memory wavefronts, issue).
# It expects tmpdev/lib-{base,d1,d2,d3,d4}.tar.xz.
cd "$(dirname "$0")/../../../.."
V="base d1 d2 d3 d4"
for v in $V; do
  mkdir -p build-$v/lib && tar -xJf tmpdev/lib-$v.tar.xz -C build-$v/lib
  (cd build-$v/lib && ln -sf libint8attn.so.0.1.0 libint8attn.so.1 && ln -sf libint8attn.so.1 libint8attn.so)
done
export PYTHONPATH=bindings/python/src
LOG=$OUT/run49a_loop_diag_ab.log
SH=sd15_l3_cfg,sd15_l3_b1=1:8:8:256:256:160,cross77=2:8:8:256:77:160,d128_128=2:8:8:128:128:128
for rep in 1 2 3; do
  for v in $V; do
    INT8ATTN_LIBRARY=build-$v/lib/libint8attn.so python3 bench/ab_time.py fast $SH >> $LOG 2>&1
  done
done
M=sm__cycles_elapsed.max,smsp__cycles_active.avg,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_tensor_op_hmma.sum,sm__pipe_shared_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__warp_issue_stalled_no_instruction_per_warp_active.pct,smsp__warp_issue_stalled_short_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_mio_throttle_per_warp_active.pct,smsp__warp_issue_stalled_math_pipe_throttle_per_warp_active.pct,smsp__warp_issue_stalled_barrier_per_warp_active.pct,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_wait_per_warp_active.pct,smsp__warp_issue_stalled_membar_per_warp_active.pct,smsp__warp_issue_stalled_lg_throttle_per_warp_active.pct,gpu__time_duration.sum
for v in base d4; do
  LD_LIBRARY_PATH=build-$v/lib INT8ATTN_LIBRARY=build-$v/lib/libint8attn.so timeout 120 ncu --clock-control none -k regex:attention_small -s 1 -c 1 --metrics $M python3 bench/profile_forward.py sd15_l3_cfg fast > $OUT/run49a_ncu_$v.txt 2>&1
done
grep -E " e2e " $LOG | awk '{k="-"; r="-"; for(i=1;i<=NF;i++) {if($i=="kernel") k=$(i+1); if($i=="rel") r=$(i+1)}; print $3, $2, $1, $5, k, r}' | sort -s -k1,2 | awk '{a[$1" "$2" "$3]=a[$1" "$2" "$3]" "$4"/"$5"/"$6} END{for(x in a) print x, a[x]}' | sort
for v in base d4; do echo "== ncu $v"; grep -E "^\s+(sm|smsp|l1tex|gpu)__" $OUT/run49a_ncu_$v.txt | awk '{print $1, $(NF)}'; done
