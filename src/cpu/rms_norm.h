// int8attn_rms_norm on the CPU.
#pragma once

#include "common/problem.h"
#include "cpu/thread_pool.h"

namespace int8attn {
namespace cpu {

void rms_norm(const RmsNormProblem& p, ThreadPool& pool);

}  // namespace cpu
}  // namespace int8attn
