// The interface between the host core and a backend. The core validates and resolves a call
// into a problem (problem.h), picks the backend from the tensors' device (dispatch), and calls
// one of these methods. Backends report failures by throwing int8attn::Error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/problem.h"

namespace int8attn {

// Backend-owned storage of a quantized K/V cache; its layout is the backend's business.
class KvCacheImpl {
 public:
  virtual ~KvCacheImpl() = default;
  virtual const CacheSpec& spec() const = 0;
  virtual int64_t length() const = 0;
  // Quantize and append; on any error the cache is unchanged (strong guarantee).
  virtual void append(const CacheAppend& a) = 0;
  virtual void reset() = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // Bytes of workspace forward() needs for this problem (its workspace fields are ignored).
  virtual size_t forward_workspace_size(const AttnProblem& p) = 0;
  // Attention; p.cache set means attention against that cache (created by this backend).
  virtual void forward(const AttnProblem& p) = 0;
  virtual void quantize(const QuantizeProblem& p) = 0;
  virtual void rotary(const RotaryProblem& p) = 0;
  virtual void rms_norm(const RmsNormProblem& p) = 0;
  virtual void predict_block_mask(const MaskProblem& p) = 0;
  virtual std::unique_ptr<KvCacheImpl> create_cache(const CacheSpec& spec, void* stream) = 0;

  // The backend's own workspace, grown to at least `bytes` (may allocate; not on a hot path
  // once reserved), for a call on `stream` (null for none: a reservation), which the caller's
  // argument `stream_arg` names in errors. Returns a pointer valid until the next call that
  // grows it; on the GPU also for CUDA graphs that captured calls using it, as long as the
  // backend lives (cuda/host/graph_safe_workspace.h).
  virtual void* workspace(size_t bytes, void* stream, const char* stream_arg) = 0;
  virtual void synchronize(void* stream) = 0;
  // Whether FAST's FP8 P·V runs here (the CPU emulates it; GPUs need FP8 tensor cores and
  // kernels compiled for them). The core maps FAST to BALANCED where not (common/modes.h).
  virtual bool fp8_available() const = 0;
};

// Factories. The CPU backend always exists; the CUDA one exists when the build has CUDA
// (otherwise make_cuda_backend throws INT8ATTN_ERROR_BACKEND_UNAVAILABLE).
std::unique_ptr<Backend> make_cpu_backend(int num_threads);
std::unique_ptr<Backend> make_cuda_backend(int device_id);

// CUDA facts for int8attn_features / device queries; safe without a driver or GPU.
bool cuda_compiled_in();
uint64_t cuda_compiled_feature_bits();  // INT8ATTN_FEATURE_SM* bits of the compiled kernels
int cuda_device_count();                // 0 when no driver or device
std::string cuda_device_describe(int device_id);  // throws Error for a bad id

}  // namespace int8attn
