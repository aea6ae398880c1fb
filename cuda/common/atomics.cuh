// Float max/min through integer atomics (the ordered-bits trick: for v >= 0 the int order of the
// bits is the float order, for v < 0 the unsigned order is reversed). Valid for finite values and
// the ±inf initial values; works on global and shared memory.
#pragma once

namespace int8attn {
namespace dev {

__device__ __forceinline__ void atomic_max_float(float* a, float v) {
  if (v >= 0.f)
    atomicMax(reinterpret_cast<int*>(a), __float_as_int(v));
  else
    atomicMin(reinterpret_cast<unsigned*>(a), __float_as_uint(v));
}
__device__ __forceinline__ void atomic_min_float(float* a, float v) {
  if (v >= 0.f)
    atomicMin(reinterpret_cast<int*>(a), __float_as_int(v));
  else
    atomicMax(reinterpret_cast<unsigned*>(a), __float_as_uint(v));
}

}  // namespace dev
}  // namespace int8attn
