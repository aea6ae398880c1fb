// Context and timestep-policy handles.
#include <memory>
#include <string>

#include "api/boundary.h"
#include "core/context.h"
#include "core/policy.h"
#include "core/validate.h"

using namespace int8attn;

extern "C" {

INT8ATTN_API void int8attn_context_params_init(int8attn_context_params_t* params) {
  if (params) *params = context_params_defaults();
}

INT8ATTN_API int8attn_status_t int8attn_context_create(int8attn_context_t** context,
                                                       const int8attn_context_params_t* params) {
  return api::guard([&] {
    api::require_ptr(context, "context");
    *context = nullptr;
    int8attn_context_params_t p = context_params_defaults();
    copy_params(p, params, "params");
    INT8ATTN_REQUIRE(
        p.num_threads >= 0 && p.num_threads <= kMaxCpuThreads, INT8ATTN_ERROR_BAD_VALUE,
        "params->num_threads is " + std::to_string(p.num_threads) + "; must be in [0, " +
            std::to_string(kMaxCpuThreads) + "] (0 = all hardware threads)");
    INT8ATTN_REQUIRE(p.device_id >= 0, INT8ATTN_ERROR_BAD_DEVICE,
                     "params->device_id is " + std::to_string(p.device_id) + "; must be >= 0");
    INT8ATTN_REQUIRE(p.reserved0 == 0, INT8ATTN_ERROR_BAD_VALUE,
                     "params->reserved0 is " + std::to_string(p.reserved0) + "; must be 0");
    if (cuda_compiled_in()) {
      const int n = cuda_device_count();
      INT8ATTN_REQUIRE(n == 0 || p.device_id < n, INT8ATTN_ERROR_BAD_DEVICE,
                       "params->device_id is " + std::to_string(p.device_id) + " but only " +
                           std::to_string(n) + " CUDA device(s) exist");
    }
    auto ctx = std::make_unique<int8attn_context>(p.device_id, p.num_threads);
    // An up-front device workspace (CUDA builds with a device; otherwise nothing to reserve).
    if (p.workspace_bytes > 0 && cuda_compiled_in() && cuda_device_count() > 0)
      ctx->reserve_workspace(INT8ATTN_DEVICE_CUDA, p.workspace_bytes);
    *context = ctx.release();
  });
}

INT8ATTN_API void int8attn_context_destroy(int8attn_context_t* context) {
  api::destroy_handle(context, "context");
}

INT8ATTN_API int8attn_status_t int8attn_context_reserve_workspace(int8attn_context_t* context,
                                                                  int32_t device_type,
                                                                  uint64_t bytes) {
  return api::guard(
      [&] { api::require_handle(context, "context").reserve_workspace(device_type, bytes); });
}

INT8ATTN_API int8attn_status_t int8attn_synchronize(int8attn_context_t* context, void* stream) {
  return api::guard([&] { api::require_handle(context, "context").synchronize(stream); });
}

INT8ATTN_API void int8attn_policy_params_init(int8attn_policy_params_t* params) {
  if (params) *params = policy_params_defaults();
}

INT8ATTN_API int8attn_status_t int8attn_policy_create(int8attn_policy_t** policy,
                                                      const int8attn_policy_params_t* params) {
  return api::guard([&] {
    api::require_ptr(policy, "policy");
    *policy = nullptr;
    api::require_ptr(params, "params");
    int8attn_policy_params_t p = policy_params_defaults();
    copy_params(p, params, "params");
    *policy = new int8attn_policy(p);
  });
}

INT8ATTN_API void int8attn_policy_destroy(int8attn_policy_t* policy) {
  api::destroy_handle(policy, "policy");
}

INT8ATTN_API int8attn_status_t int8attn_policy_set_mode(int8attn_policy_t* policy, int32_t timestep,
                                                        int32_t mode) {
  return api::guard([&] { api::require_handle(policy, "policy").set_mode(timestep, mode); });
}

INT8ATTN_API int8attn_status_t int8attn_policy_get(int32_t* mode, float* scale_multiplier,
                                                   const int8attn_policy_t* policy,
                                                   int32_t timestep) {
  return api::guard([&] {
    const Policy& pol = api::require_handle(policy, "policy");
    const int32_t m = pol.mode(timestep);
    const float s = pol.multiplier(timestep);
    if (mode) *mode = m;
    if (scale_multiplier) *scale_multiplier = s;
  });
}

INT8ATTN_API int8attn_status_t int8attn_policy_num_timesteps(int32_t* num_timesteps,
                                                             const int8attn_policy_t* policy) {
  return api::guard([&] {
    api::require_ptr(num_timesteps, "num_timesteps");
    *num_timesteps = api::require_handle(policy, "policy").num_timesteps();
  });
}

}  // extern "C"
