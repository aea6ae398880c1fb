// Shared-memory tile addressing that keeps ldmatrix / cp.async conflict-free for every row
// width the kernels use (32 .. 512 bytes = C chunks of 16 bytes, C always even).
// - C a power of two: XOR swizzle of the 16-byte chunk index, rows packed back to back:
//     C >= 8: chunk' = chunk ^ (row & 7)
//     C <  8: chunk' = chunk ^ ((row / (8/C)) & (C-1))   (8/C rows share one 128-byte line)
// - otherwise (96, 160, 192, 224-byte rows...): no XOR (it would not be a permutation of
//   [0, C)); rows are padded to C+1 chunks, an odd pitch, so 8 consecutive rows start in 8
//   different bank groups.
#pragma once

#include <cstdint>

namespace int8attn {
namespace dev {

template <int kRowBytes>
struct SwizzledTile {
  static_assert(kRowBytes % 16 == 0 && kRowBytes >= 32, "rows must be >= 2 chunks of 16 bytes");
  static constexpr int kChunks = kRowBytes / 16;
  static constexpr bool kPow2 = (kChunks & (kChunks - 1)) == 0;
  static constexpr int kPitch = kPow2 ? kRowBytes : kRowBytes + 16;  // bytes between rows

  __device__ __forceinline__ static int chunk(int row, int c) {
    if constexpr (!kPow2) {
      return c;
    } else if constexpr (kChunks >= 8) {
      return c ^ (row & 7);
    } else {
      return c ^ ((row / (8 / kChunks)) & (kChunks - 1));
    }
  }
  // Byte offset of (row, byte) where byte is a multiple of 16 or lies within one chunk.
  __device__ __forceinline__ static int offset(int row, int byte) {
    return row * kPitch + chunk(row, byte >> 4) * 16 + (byte & 15);
  }
};

// The wgmma canonical K-major layout of a [kRows][kRowBytes] tile whose rows are wider than
// the swizzle span (or not a power of two): column slabs kSpan bytes wide (32, 64 or 128, the
// widest dividing kRowBytes), each a [kRows][kSpan] SwizzledTile<kSpan>, slab after slab.
// SwizzledTile<kSpan>'s XOR pattern is the TMA / wgmma swizzle of span kSpan, so TMA boxes
// {kSpan, rows} land in it and wgmma descriptors of swizzle kSpan read it. One slab when the
// row fits a span (head dims 64 and 128).
template <int kRowBytes, int kRows>
struct SlabTile {
  static constexpr int kSpan = kRowBytes % 128 == 0 ? 128 : kRowBytes % 64 == 0 ? 64 : 32;
  static_assert(kRowBytes % kSpan == 0, "rows must be whole 32-byte spans");
  static constexpr int kSlabs = kRowBytes / kSpan;
  static constexpr int kSlabBytes = kRows * kSpan;
  // Byte offset of (row, byte) where byte is a multiple of 16 or lies within one chunk.
  __device__ __forceinline__ static int offset(int row, int byte) {
    return (byte / kSpan) * kSlabBytes + SwizzledTile<kSpan>::offset(row, byte % kSpan);
  }
  // Offset of the 32-byte k-step kk (an INT8 wgmma's K extent) of row 0.
  __host__ __device__ static constexpr int kstep_offset(int kk) {
    return (kk * 32 / kSpan) * kSlabBytes + (kk * 32) % kSpan;
  }
};

}  // namespace dev
}  // namespace int8attn
