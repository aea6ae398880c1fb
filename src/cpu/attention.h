// Streaming (online-softmax) attention over prepared K/V, multi-threaded over
// (batch, q-head, 64-row query block). Never materialises more than one 64-key tile of scores.
#pragma once

#include <vector>

#include "common/problem.h"
#include "cpu/kv_view.h"
#include "cpu/thread_pool.h"

namespace int8attn {
namespace cpu {

// views[b·Hkv + hkv] holds the prepared keys/values of that (batch, kv-head); each view's
// length is the valid length L_b used for the causal alignment. p.mode selects the arithmetic
// (EXACT: fp32; BALANCED: INT8 QK, fp16 P and V; FAST: INT8 QK, e4m3 P and V).
void run_attention(const AttnProblem& p, const std::vector<const KvView*>& views, ThreadPool& pool);

}  // namespace cpu
}  // namespace int8attn
