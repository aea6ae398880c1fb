// Host launchers of the auxiliary GPU kernels: block-mask prediction (block_mask.cu), the
// standalone quantize entry point (quantize.cu), the rotary embedding (rotary.cu) and the RMS
// normalization (rms_norm.cu). All follow the CPU backend's semantics.
#pragma once

#include <cuda_runtime.h>

#include "common/problem.h"

namespace int8attn {

// Workspace floats predict_block_mask needs (pooled Q and K).
int64_t block_mask_workspace_floats(const MaskProblem& p);
cudaError_t launch_predict_block_mask(const MaskProblem& p, float* workspace, cudaStream_t s);

int64_t quantize_workspace_floats(const QuantizeProblem& p);
cudaError_t launch_quantize(const QuantizeProblem& p, float* workspace, cudaStream_t s);

// int8attn_rotary (no workspace; bit-identical to the CPU backend).
cudaError_t launch_rotary(const RotaryProblem& p, cudaStream_t s);

// int8attn_rms_norm (no workspace; bit-identical to the CPU backend).
cudaError_t launch_rms_norm(const RmsNormProblem& p, cudaStream_t s);

}  // namespace int8attn
