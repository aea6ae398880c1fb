// The timestep policy: a table, built once per sampler, of (precision mode, INT8 scale multiplier)
// per step. Immutable after creation except for set_mode().
#pragma once

#include <cstdint>
#include <vector>

#include "core/handle.h"
#include "int8attn.h"

namespace int8attn {

class Policy {
 public:
  // Validates and builds from the caller's params (already copied/size-checked).
  explicit Policy(const int8attn_policy_params_t& p);

  int32_t num_timesteps() const { return static_cast<int32_t>(modes_.size()); }
  int32_t mode(int32_t timestep) const;      // throws BAD_VALUE for a bad step
  float multiplier(int32_t timestep) const;  // throws BAD_VALUE for a bad step
  void set_mode(int32_t timestep, int32_t mode);

 private:
  void check_step(int32_t timestep, const char* name) const;
  std::vector<int32_t> modes_;
  std::vector<float> multipliers_;
};

// Defaults of int8attn_policy_params_t.
int8attn_policy_params_t policy_params_defaults();
// Mode must be EXACT, BALANCED or FAST (a policy cannot say DEFAULT).
void check_concrete_mode(int32_t mode, const char* name);

}  // namespace int8attn

// The handle: the tag first (at offset 0, see core/handle.h), then the policy.
struct int8attn_policy : int8attn::HandleTag, int8attn::Policy {
  explicit int8attn_policy(const int8attn_policy_params_t& params)
      : HandleTag(int8attn::HandleKind::kPolicy), Policy(params) {}
};

template <>
struct int8attn::HandleTraits<int8attn_policy> {
  static constexpr HandleKind kind = HandleKind::kPolicy;
  static constexpr const char* name = "policy";
};
