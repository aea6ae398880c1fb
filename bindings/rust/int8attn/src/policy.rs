//! The timestep policy.

use crate::error::{check, Error, Result, Status};
use crate::types::Mode;
use int8attn_sys as sys;
use std::ptr::NonNull;

/// A timestep policy: maps each sampler step to a precision mode and a scale multiplier
/// (`int8attn_policy_t`). Build it once per sampler and pass it to every forward call with
/// [`ForwardParams::policy`](crate::ForwardParams::policy).
///
/// Thread safety follows the header: the policy is immutable after creation except through
/// [`Policy::set_mode`] (which takes `&mut self`), and concurrent reads are safe, so `Policy` is
/// `Send + Sync`: several threads (each with its own [`Context`](crate::Context)) may share a
/// `&Policy`.
pub struct Policy {
    raw: NonNull<sys::int8attn_policy_t>,
}

// SAFETY: the header allows any thread to use a policy, and concurrent reads (policy_get,
// forward calls) while nobody modifies it; modification requires &mut self.
unsafe impl Send for Policy {}
unsafe impl Sync for Policy {}

impl Drop for Policy {
    fn drop(&mut self) {
        // SAFETY: we own the handle.
        unsafe { sys::int8attn_policy_destroy(self.raw.as_ptr()) }
    }
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy").field("num_timesteps", &self.num_timesteps().ok()).finish()
    }
}

impl Policy {
    /// A policy of `num_timesteps` steps with the library's defaults (first and last step
    /// [`Mode::Exact`], the others [`Mode::Fast`]).
    pub fn new(num_timesteps: i32) -> Result<Policy> {
        PolicyBuilder::new().num_timesteps(num_timesteps).build()
    }

    /// A builder for every option.
    pub fn builder<'a>() -> PolicyBuilder<'a> {
        PolicyBuilder::new()
    }

    /// The mode and scale multiplier chosen for `timestep`.
    pub fn get(&self, timestep: i32) -> Result<(Mode, f32)> {
        let mut mode: i32 = 0;
        let mut mult: f32 = 0.0;
        // SAFETY: valid handle and out-pointers.
        check(unsafe { sys::int8attn_policy_get(&mut mode, &mut mult, self.raw.as_ptr(), timestep) })?;
        let m = Mode::from_raw(mode)
            .ok_or_else(|| Error::new(Status::INTERNAL, format!("policy returned unknown mode {}", mode)))?;
        Ok((m, mult))
    }

    /// Override the mode of one step.
    pub fn set_mode(&mut self, timestep: i32, mode: Mode) -> Result<()> {
        // SAFETY: valid handle; &mut self excludes concurrent readers.
        check(unsafe { sys::int8attn_policy_set_mode(self.raw.as_ptr(), timestep, mode.to_raw()) })
    }

    /// Number of steps T.
    pub fn num_timesteps(&self) -> Result<i32> {
        let mut t = 0i32;
        // SAFETY: valid handle and out-pointer.
        check(unsafe { sys::int8attn_policy_num_timesteps(&mut t, self.raw.as_ptr()) })?;
        Ok(t)
    }

    /// The C handle (still owned by this object).
    pub fn as_raw(&self) -> *const sys::int8attn_policy_t {
        self.raw.as_ptr()
    }
}

/// Builder of a [`Policy`] (`int8attn_policy_params_t`). Arrays are copied by the library.
#[derive(Clone)]
pub struct PolicyBuilder<'a> {
    raw: sys::int8attn_policy_params_t,
    sigmas: Option<&'a [f32]>,
    multipliers: Option<&'a [f32]>,
}

impl Default for PolicyBuilder<'_> {
    fn default() -> Self {
        Self::new()
    }
}

impl<'a> PolicyBuilder<'a> {
    /// The library's defaults.
    pub fn new() -> Self {
        let mut raw = std::mem::MaybeUninit::<sys::int8attn_policy_params_t>::zeroed();
        // SAFETY: init writes the whole struct.
        unsafe { sys::int8attn_policy_params_init(raw.as_mut_ptr()) };
        PolicyBuilder { raw: unsafe { raw.assume_init() }, sigmas: None, multipliers: None }
    }
    /// Number of sampler steps (or use [`PolicyBuilder::sigmas`]).
    pub fn num_timesteps(mut self, t: i32) -> Self {
        self.raw.num_timesteps = t;
        self
    }
    /// A noise schedule, one sigma per step (T = its length when `num_timesteps` is 0).
    pub fn sigmas(mut self, sigmas: &'a [f32]) -> Self {
        self.sigmas = Some(sigmas);
        self
    }
    /// Mode of ordinary steps (default [`Mode::Fast`]).
    pub fn default_mode(mut self, m: Mode) -> Self {
        self.raw.default_mode = m.to_raw();
        self
    }
    /// Mode of the protected edge steps (default [`Mode::Exact`]).
    pub fn edge_mode(mut self, m: Mode) -> Self {
        self.raw.edge_mode = m.to_raw();
        self
    }
    /// How many first and last steps run in the edge mode (default 1 and 1).
    pub fn edges(mut self, first: i32, last: i32) -> Self {
        self.raw.num_first_edge = first;
        self.raw.num_last_edge = last;
        self
    }
    /// With sigmas: steps with sigma ≥ `above` or ≤ `below` also use the edge mode.
    pub fn sigma_edges(mut self, above: f32, below: f32) -> Self {
        self.raw.sigma_edge_above = above;
        self.raw.sigma_edge_below = below;
        self
    }
    /// Per-step multipliers in (0, 1] of the INT8 scales (length T).
    pub fn scale_multipliers(mut self, m: &'a [f32]) -> Self {
        self.multipliers = Some(m);
        self
    }
    /// Create the policy.
    pub fn build(&self) -> Result<Policy> {
        let mut raw = self.raw;
        if let Some(s) = self.sigmas {
            raw.sigmas = s.as_ptr();
            raw.num_sigmas = i32::try_from(s.len())
                .map_err(|_| Error::new(Status::SIZE_OVERFLOW, format!("{} sigmas do not fit int32", s.len())))?;
        }
        if let Some(m) = self.multipliers {
            let t = if raw.num_timesteps > 0 { raw.num_timesteps as usize } else { raw.num_sigmas as usize };
            if m.len() != t {
                return Err(Error::new(
                    Status::BAD_VALUE,
                    format!("scale_multipliers has {} entries but the policy has {} steps", m.len(), t),
                ));
            }
            raw.scale_multipliers = m.as_ptr();
        }
        let mut handle: *mut sys::int8attn_policy_t = std::ptr::null_mut();
        // SAFETY: raw is initialised; the arrays outlive the call and are copied by it.
        check(unsafe { sys::int8attn_policy_create(&mut handle, &raw) })?;
        NonNull::new(handle)
            .map(|raw| Policy { raw })
            .ok_or_else(|| Error::new(Status::INTERNAL, "int8attn_policy_create returned OK and NULL"))
    }
}
