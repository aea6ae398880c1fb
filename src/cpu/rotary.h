// int8attn_rotary on the CPU.
#pragma once

#include "common/problem.h"
#include "cpu/thread_pool.h"

namespace int8attn {
namespace cpu {

void rotary(const RotaryProblem& p, ThreadPool& pool);

}  // namespace cpu
}  // namespace int8attn
