#include "core/context.h"

#include <cstdint>
#include <string>

#include "core/error.h"

namespace int8attn {

int8attn_context_params_t context_params_defaults() {
  int8attn_context_params_t p{};
  p.struct_size = sizeof(p);
  p.device_id = 0;
  p.num_threads = 0;
  p.reserved0 = 0;
  p.workspace_bytes = 0;
  return p;
}

Context::Context(int32_t device_id, int32_t num_threads)
    : device_id_(device_id), num_threads_(num_threads) {}

Context::~Context() {
  // Wait for queued GPU work before the workspace goes away; errors cannot be reported here.
  if (cuda_) {
    try {
      cuda_->synchronize(nullptr);
    } catch (...) {
    }
  }
}

Backend& Context::backend(int32_t device_type, const char* what) {
  std::lock_guard<std::mutex> lock(create_mu_);
  if (device_type == INT8ATTN_DEVICE_CPU) {
    if (!cpu_) cpu_ = make_cpu_backend(num_threads_);
    return *cpu_;
  }
  if (device_type == INT8ATTN_DEVICE_CUDA) {
    if (!cuda_) {
      if (!cuda_compiled_in()) {
        throw Error(INT8ATTN_ERROR_BACKEND_UNAVAILABLE,
                    std::string(what) +
                        ": is in CUDA memory but this build of int8attn has no CUDA backend "
                        "(configured with INT8ATTN_ENABLE_CUDA=OFF or without nvcc); pass CPU "
                        "tensors or use a CUDA build");
      }
      const int n = cuda_device_count();
      if (n <= 0) {
        throw Error(
            INT8ATTN_ERROR_BACKEND_UNAVAILABLE,
            std::string(what) + ": is in CUDA memory but no CUDA device (or driver) was found");
      }
      if (device_id_ >= n) {
        throw Error(INT8ATTN_ERROR_BAD_DEVICE, "context: device_id is " +
                                                   std::to_string(device_id_) + " but only " +
                                                   std::to_string(n) + " CUDA device(s) exist");
      }
      cuda_ = make_cuda_backend(device_id_);
    }
    return *cuda_;
  }
  throw Error(INT8ATTN_ERROR_BAD_DEVICE,
              std::string(what) + ": device_type is " + std::to_string(device_type) +
                  "; must be INT8ATTN_DEVICE_CPU (1) or INT8ATTN_DEVICE_CUDA (2)");
}

uint64_t Context::forward_workspace_size(const AttnProblem& p) {
  return backend(p.device_type, "q").forward_workspace_size(p);
}

void Context::forward(AttnProblem& p, void* caller_workspace, uint64_t caller_workspace_bytes) {
  Backend& be = backend(p.device_type, "q");
  const size_t need = be.forward_workspace_size(p);
  if (caller_workspace) {
    if (caller_workspace_bytes < need) {
      throw Error(INT8ATTN_ERROR_WORKSPACE_TOO_SMALL,
                  "params->workspace_bytes is " + std::to_string(caller_workspace_bytes) +
                      " but this call needs " + std::to_string(need) +
                      " bytes (see int8attn_forward_workspace_size)");
    }
    p.workspace = caller_workspace;
    p.workspace_bytes = static_cast<size_t>(caller_workspace_bytes);
  } else if (need > 0) {
    p.workspace = be.workspace(need, p.stream, "params->stream");
    p.workspace_bytes = need;
  } else {
    p.workspace = nullptr;
    p.workspace_bytes = 0;
  }
  be.forward(p);
}

void Context::reserve_workspace(int32_t device_type, uint64_t bytes) {
  INT8ATTN_REQUIRE(bytes <= static_cast<uint64_t>(SIZE_MAX / 2), INT8ATTN_ERROR_SIZE_OVERFLOW,
                   "bytes is " + std::to_string(bytes) + "; too large for this platform");
  if (device_type != INT8ATTN_DEVICE_CPU && device_type != INT8ATTN_DEVICE_CUDA) {
    throw Error(INT8ATTN_ERROR_BAD_DEVICE,
                "device_type is " + std::to_string(device_type) +
                    "; must be INT8ATTN_DEVICE_CPU (1) or INT8ATTN_DEVICE_CUDA (2)");
  }
  Backend& be = backend(device_type, "device_type");
  if (bytes > 0) be.workspace(static_cast<size_t>(bytes), nullptr, "stream");
}

void Context::synchronize(void* stream) {
  if (cuda_) cuda_->synchronize(stream);
  if (cpu_) cpu_->synchronize(stream);
}

}  // namespace int8attn
