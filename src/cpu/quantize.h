// int8attn_quantize on the CPU, and block-mask prediction from pooled Q/K.
#pragma once

#include "common/problem.h"
#include "cpu/thread_pool.h"

namespace int8attn {
namespace cpu {

void quantize(const QuantizeProblem& p, ThreadPool& pool);
void predict_block_mask(const MaskProblem& p, ThreadPool& pool);

}  // namespace cpu
}  // namespace int8attn
