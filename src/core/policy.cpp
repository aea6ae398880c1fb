#include "core/policy.h"

#include <cmath>
#include <limits>
#include <sstream>
#include <string>

#include "core/error.h"

namespace int8attn {

int8attn_policy_params_t policy_params_defaults() {
  int8attn_policy_params_t p{};
  p.struct_size = sizeof(p);
  p.num_timesteps = 0;
  p.sigmas = nullptr;
  p.num_sigmas = 0;
  p.default_mode = INT8ATTN_MODE_FAST;
  p.edge_mode = INT8ATTN_MODE_EXACT;
  p.num_first_edge = 1;
  p.num_last_edge = 1;
  p.sigma_edge_above = std::numeric_limits<float>::infinity();
  p.sigma_edge_below = 0.0f;
  p.scale_multipliers = nullptr;
  return p;
}

void check_concrete_mode(int32_t mode, const char* name) {
  if (mode != INT8ATTN_MODE_EXACT && mode != INT8ATTN_MODE_BALANCED && mode != INT8ATTN_MODE_FAST) {
    throw Error(INT8ATTN_ERROR_UNSUPPORTED_MODE,
                std::string(name) + " is " + std::to_string(mode) +
                    "; must be INT8ATTN_MODE_EXACT (1), BALANCED (2) or FAST (3)");
  }
}

Policy::Policy(const int8attn_policy_params_t& p) {
  INT8ATTN_REQUIRE(
      p.num_timesteps >= 0, INT8ATTN_ERROR_BAD_VALUE,
      "params->num_timesteps is " + std::to_string(p.num_timesteps) + "; must be >= 0");
  INT8ATTN_REQUIRE(p.num_sigmas >= 0, INT8ATTN_ERROR_BAD_VALUE,
                   "params->num_sigmas is " + std::to_string(p.num_sigmas) + "; must be >= 0");
  INT8ATTN_REQUIRE(p.num_sigmas == 0 || p.sigmas != nullptr, INT8ATTN_ERROR_NULL_POINTER,
                   "params->sigmas is NULL but num_sigmas is " + std::to_string(p.num_sigmas));
  const int32_t ns = p.sigmas ? p.num_sigmas : 0;
  int32_t T = p.num_timesteps;
  if (T == 0) T = ns;
  INT8ATTN_REQUIRE(T > 0, INT8ATTN_ERROR_BAD_VALUE,
                   "params: no steps (num_timesteps is 0 and no sigmas are given)");
  INT8ATTN_REQUIRE(ns == 0 || ns == T, INT8ATTN_ERROR_BAD_VALUE,
                   "params->num_sigmas is " + std::to_string(ns) + " but num_timesteps is " +
                       std::to_string(p.num_timesteps) + "; give one sigma per step");
  check_concrete_mode(p.default_mode, "params->default_mode");
  check_concrete_mode(p.edge_mode, "params->edge_mode");
  INT8ATTN_REQUIRE(
      p.num_first_edge >= 0, INT8ATTN_ERROR_BAD_VALUE,
      "params->num_first_edge is " + std::to_string(p.num_first_edge) + "; must be >= 0");
  INT8ATTN_REQUIRE(
      p.num_last_edge >= 0, INT8ATTN_ERROR_BAD_VALUE,
      "params->num_last_edge is " + std::to_string(p.num_last_edge) + "; must be >= 0");
  INT8ATTN_REQUIRE(!std::isnan(p.sigma_edge_above), INT8ATTN_ERROR_BAD_VALUE,
                   "params->sigma_edge_above is NaN");
  INT8ATTN_REQUIRE(!std::isnan(p.sigma_edge_below), INT8ATTN_ERROR_BAD_VALUE,
                   "params->sigma_edge_below is NaN");

  modes_.assign(static_cast<size_t>(T), p.default_mode);
  multipliers_.assign(static_cast<size_t>(T), 1.0f);
  for (int32_t t = 0; t < T; ++t) {
    bool edge = t < p.num_first_edge || t >= T - p.num_last_edge;
    if (ns > 0) {
      const float s = p.sigmas[t];
      if (std::isnan(s)) {
        throw Error(INT8ATTN_ERROR_BAD_VALUE, "params->sigmas[" + std::to_string(t) + "] is NaN");
      }
      // +inf (default) switches the upper threshold off, <= 0 (default) the lower one.
      if (std::isfinite(p.sigma_edge_above) && s >= p.sigma_edge_above) edge = true;
      if (p.sigma_edge_below > 0.0f && s <= p.sigma_edge_below) edge = true;
    }
    if (edge) modes_[static_cast<size_t>(t)] = p.edge_mode;
    if (p.scale_multipliers) {
      const float m = p.scale_multipliers[t];
      if (!(m > 0.0f && m <= 1.0f)) {
        std::ostringstream msg;
        msg << "params->scale_multipliers[" << t << "] is " << m << "; must be in (0, 1]";
        throw Error(INT8ATTN_ERROR_BAD_VALUE, msg.str());
      }
      multipliers_[static_cast<size_t>(t)] = m;
    }
  }
}

void Policy::check_step(int32_t timestep, const char* name) const {
  INT8ATTN_REQUIRE(timestep >= 0 && timestep < num_timesteps(), INT8ATTN_ERROR_BAD_VALUE,
                   std::string(name) + " is " + std::to_string(timestep) +
                       "; the policy has steps [0, " + std::to_string(num_timesteps()) + ")");
}

int32_t Policy::mode(int32_t timestep) const {
  check_step(timestep, "timestep");
  return modes_[static_cast<size_t>(timestep)];
}

float Policy::multiplier(int32_t timestep) const {
  check_step(timestep, "timestep");
  return multipliers_[static_cast<size_t>(timestep)];
}

void Policy::set_mode(int32_t timestep, int32_t mode) {
  check_step(timestep, "timestep");
  check_concrete_mode(mode, "mode");
  modes_[static_cast<size_t>(timestep)] = mode;
}

}  // namespace int8attn
