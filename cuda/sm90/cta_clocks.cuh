// Per-CTA phase clocks of the sm90a attention kernel, for profiling builds only
// (cmake -DINT8ATTN_CTA_CLOCKS=ON; bench/cta_phases.py reads them back through
// int8attn_debug_cta_clocks, which only such a build exports). A CTA's fixed cost (its Q
// prologue, first tile, epilogue, launch) weighs most where each CTA has few key tiles, and a
// kernel-wide timer cannot split it from the loop: each CTA writes SM cycles at its phase
// boundaries, and the globaltimer at its start and end, to one row of a device buffer indexed
// by its linear block id (the last launch's rows overwrite older ones; ids past kMaxCtas wrap).
// In ordinary builds every hook is empty and no buffer exists.
#pragma once

#include <cstdint>

namespace int8attn {
namespace cta_clocks {

// One row's slots: cycles unless named otherwise.
enum Slot : int {
  kEntryNs = 0,  // globaltimer at entry (thread 0)
  kEntry,        // thread 0, at entry
  kSm,           // the SM it ran on
  kPrepared,     // thread 0, past the wait for the preparation's kernels
  kTiles,        // key tiles the CTA's rows see
  kQReady,       // the first consumer thread, Q quantized into shared memory (its named barrier)
  kFirstTile,    // the first consumer thread, the first K/V stage landed
  kLoopDone,     // the first consumer thread, the key loop done
  kDone,         // the first consumer thread, O written
  kDoneNs,       // globaltimer there
  kQLanded,      // the first consumer thread, its warp's raw Q rows landed (Q by TMA only)
  kSlots = 16
};
constexpr int kMaxCtas = 65536;

#if defined(INT8ATTN_CTA_CLOCKS) && INT8ATTN_CTA_CLOCKS
static __device__ unsigned long long g_rows[kMaxCtas * kSlots];

__device__ __forceinline__ unsigned long long* row() {
  const unsigned id = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  return g_rows + static_cast<size_t>(id % kMaxCtas) * kSlots;
}
__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
// The cycle counter into slot S.
template <Slot S>
__device__ __forceinline__ void stamp() {
  row()[S] = clock64();
}
__device__ __forceinline__ void entry() {
  unsigned sm_id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm_id));
  unsigned long long* r = row();
  r[kEntryNs] = global_ns();
  r[kEntry] = clock64();
  r[kSm] = sm_id;
}
__device__ __forceinline__ void done(int tiles) {
  unsigned long long* r = row();
  r[kDone] = clock64();
  r[kDoneNs] = global_ns();
  r[kTiles] = static_cast<unsigned long long>(tiles);
}
#else
template <Slot S>
__device__ __forceinline__ void stamp() {}
__device__ __forceinline__ void entry() {}
__device__ __forceinline__ void done(int) {}
#endif

}  // namespace cta_clocks
}  // namespace int8attn
