// fp16 / bf16 conversion on the host and the size and name of the element types the reference
// code stores (F16, BF16, F32; I32 and U8 for lengths and masks).
#pragma once

#include <cstddef>
#include <cstdint>

namespace int8attn_ref {

uint16_t float_to_half(float f);  // round to nearest even; overflow -> inf
float half_to_float(uint16_t h);
uint16_t float_to_bfloat(float f);  // round to nearest even
float bfloat_to_float(uint16_t h);
// The value `f` becomes when stored in `dtype` (F16, BF16 or F32).
float round_to_dtype(float f, int32_t dtype);
size_t dtype_size(int32_t dtype);
const char* dtype_name(int32_t dtype);

}  // namespace int8attn_ref
