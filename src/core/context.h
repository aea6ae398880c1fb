// The context behind int8attn_context_t: owns the backends (created lazily: the CPU backend on
// the first CPU call, the CUDA backend on the first CUDA call) and picks one by device (dispatch).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>

#include "core/backend.h"
#include "core/handle.h"
#include "common/problem.h"
#include "int8attn.h"

namespace int8attn {

// Largest params->num_threads (documented in int8attn.h); the CPU thread pool clamps to the same
// value (cpu::ThreadPool::kMaxThreads, checked in cpu_backend.cpp).
constexpr int32_t kMaxCpuThreads = 1024;

class Context {
 public:
  Context(int32_t device_id, int32_t num_threads);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int32_t device_id() const { return device_id_; }
  int32_t num_threads() const { return num_threads_; }

  // The backend serving tensors of this device type (created on first use). `what` names the
  // argument for messages (e.g. "q").
  Backend& backend(int32_t device_type, const char* what);

  // Fill p.workspace from the caller's buffer (checked against the backend's requirement) or
  // the backend's own workspace, then run the problem.
  void forward(AttnProblem& p, void* caller_workspace, uint64_t caller_workspace_bytes);
  // Workspace bytes the backend needs for p.
  uint64_t forward_workspace_size(const AttnProblem& p);

  void reserve_workspace(int32_t device_type, uint64_t bytes);
  void synchronize(void* stream);

 private:
  int32_t device_id_;
  int32_t num_threads_;
  // Serialises the lazy creation of the backends: concurrent calls on one context are not
  // supported, but several threads' first calls must not create a backend twice.
  std::mutex create_mu_;
  std::unique_ptr<Backend> cpu_;
  std::unique_ptr<Backend> cuda_;
};

// Defaults of int8attn_context_params_t.
int8attn_context_params_t context_params_defaults();

}  // namespace int8attn

// The handle: the tag first (at offset 0, see core/handle.h), then the context.
struct int8attn_context : int8attn::HandleTag, int8attn::Context {
  int8attn_context(int32_t device_id, int32_t num_threads)
      : HandleTag(int8attn::HandleKind::kContext), Context(device_id, num_threads) {}
};

template <>
struct int8attn::HandleTraits<int8attn_context> {
  static constexpr HandleKind kind = HandleKind::kContext;
  static constexpr const char* name = "context";
};
