// int8attn_reference: the measurement code shared by the `int8attn` command-line tool
// (tools/cli) and the tests (tests/): everything it needs to judge an attention output, built
// on the public header include/int8attn.h only (C++17; a static library, not installed).
//   ref_dtype.h        fp16/bf16 conversion, dtype sizes and names
//   ref_host_tensor.h  HostTensor (host buffer, HND/NHD layout) and its descriptors
//   ref_inputs.h       input families (Gaussian, outlier channels, channel bias, peaky)
//   ref_attention.h    float64 reference attention with every forward option
//   ref_metrics.h      accuracy metrics and the accuracy bar of shared/BENCHMARKS.md
// Include this header, or only the part you need. Namespace: int8attn_ref.
#pragma once

#include "ref_attention.h"
#include "ref_dtype.h"
#include "ref_host_tensor.h"
#include "ref_inputs.h"
#include "ref_metrics.h"
