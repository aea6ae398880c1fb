//! Option builders for forward, quantize and block-mask prediction.

use crate::policy::Policy;
use crate::tensor::{TensorView, TensorViewMut};
use crate::types::{Flags, Granularity, Mode, RotaryArithmetic};
use int8attn_sys as sys;
use std::marker::PhantomData;
use std::os::raw::c_void;

/// Options of [`Context::attention`](crate::Context::attention) and of attention against a
/// [`KvCache`](crate::KvCache) (`int8attn_forward_params_t`), as a builder.
///
/// The lifetime `'a` covers everything the options borrow: valid-length and block-mask tensors,
/// the LSE output and the policy.
///
/// ```no_run
/// # use int8attn::*;
/// # fn demo(policy: &Policy, lse: &mut TensorViewMut<'_>) {
/// let params = ForwardParams::new()
///     .mode(Mode::Default)      // take the mode from the policy
///     .policy(policy, 3)        // timestep 3
///     .causal(false)
///     .lse(lse);                // also write the log-sum-exp of each row
/// # }
/// ```
#[derive(Clone)]
pub struct ForwardParams<'a> {
    raw: sys::int8attn_forward_params_t,
    _borrows: PhantomData<&'a ()>,
}

impl Default for ForwardParams<'_> {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for ForwardParams<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ForwardParams")
            .field("mode", &self.raw.mode)
            .field("sm_scale", &self.raw.sm_scale)
            .field("causal", &self.raw.causal)
            .field("flags", &self.raw.flags)
            .field("timestep", &self.raw.timestep)
            .finish_non_exhaustive()
    }
}

impl<'a> ForwardParams<'a> {
    /// The library's defaults (`int8attn_forward_params_init`).
    pub fn new() -> Self {
        let mut raw = std::mem::MaybeUninit::<sys::int8attn_forward_params_t>::zeroed();
        // SAFETY: init writes the whole struct.
        unsafe { sys::int8attn_forward_params_init(raw.as_mut_ptr()) };
        ForwardParams { raw: unsafe { raw.assume_init() }, _borrows: PhantomData }
    }

    /// Precision mode (default [`Mode::Default`]: the policy's, else balanced).
    pub fn mode(mut self, mode: Mode) -> Self {
        self.raw.mode = mode.to_raw();
        self
    }

    /// Softmax scale; 0 means 1/sqrt(D).
    pub fn sm_scale(mut self, scale: f32) -> Self {
        self.raw.sm_scale = scale;
        self
    }

    /// Causal mask (bottom-right aligned).
    pub fn causal(mut self, causal: bool) -> Self {
        self.raw.causal = causal as i32;
        self
    }

    /// Scale granularity of Q.
    pub fn q_granularity(mut self, g: Granularity) -> Self {
        self.raw.q_granularity = g.to_raw();
        self
    }

    /// Scale granularity of K.
    pub fn k_granularity(mut self, g: Granularity) -> Self {
        self.raw.k_granularity = g.to_raw();
        self
    }

    /// Refinement flags.
    pub fn flags(mut self, flags: Flags) -> Self {
        self.raw.flags = flags.0;
        self
    }

    /// Multiplier in (0, 1] of the INT8 scales.
    pub fn scale_multiplier(mut self, m: f32) -> Self {
        self.raw.scale_multiplier = m;
        self
    }

    /// Per-batch valid key lengths: an int32 `[B]` tensor on the queries' device.
    pub fn k_lengths(mut self, lengths: &'a TensorView<'_>) -> Self {
        self.raw.k_lengths = lengths.as_raw();
        self
    }

    /// A uint8 block mask `[B|1, Hq|1, ⌈Nq/q_block⌉, ⌈Nk/k_block⌉]` (0 = skip).
    pub fn block_mask(mut self, mask: &'a TensorView<'_>, q_block: i32, k_block: i32) -> Self {
        self.raw.block_mask = mask.as_raw();
        self.raw.mask_q_block = q_block;
        self.raw.mask_k_block = k_block;
        self
    }

    /// Also write the natural-log log-sum-exp of every row into a float32 `[B, Hq, Nq]` tensor.
    pub fn lse(mut self, lse: &'a mut TensorViewMut<'_>) -> Self {
        self.raw.lse = lse.as_raw();
        self
    }

    /// Use a timestep policy at step `timestep`.
    pub fn policy(mut self, policy: &'a Policy, timestep: i32) -> Self {
        self.raw.policy = policy.as_raw();
        self.raw.timestep = timestep;
        self
    }

    /// A caller-provided workspace on the tensors' device (see
    /// [`Context::attention_workspace_size`](crate::Context::attention_workspace_size)).
    ///
    /// # Safety
    /// `ptr` must point to `bytes` bytes of memory on the tensors' device that nothing else
    /// uses while the call (and, on the GPU, its queued work) runs.
    pub unsafe fn workspace(mut self, ptr: *mut c_void, bytes: u64) -> Self {
        self.raw.workspace = ptr;
        self.raw.workspace_bytes = bytes;
        self
    }

    /// The CUDA stream (`cudaStream_t`) to queue GPU work on; ignored for CPU tensors.
    ///
    /// # Safety
    /// `stream` must be a valid stream of the tensors' device (or NULL) for as long as these
    /// options are used.
    pub unsafe fn stream(mut self, stream: *mut c_void) -> Self {
        self.raw.stream = stream;
        self
    }

    /// The C struct.
    pub fn as_raw(&self) -> &sys::int8attn_forward_params_t {
        &self.raw
    }
}

/// Options of [`Context::quantize`](crate::Context::quantize) (`int8attn_quantize_params_t`).
#[derive(Clone, Debug)]
pub struct QuantizeParams {
    raw: sys::int8attn_quantize_params_t,
}

impl Default for QuantizeParams {
    fn default() -> Self {
        Self::new()
    }
}

impl QuantizeParams {
    /// The library's defaults (per block of [`sys::INT8ATTN_QUANT_BLOCK`] tokens, no smoothing,
    /// multiplier 1).
    pub fn new() -> Self {
        let mut raw = std::mem::MaybeUninit::<sys::int8attn_quantize_params_t>::zeroed();
        // SAFETY: init writes the whole struct.
        unsafe { sys::int8attn_quantize_params_init(raw.as_mut_ptr()) };
        QuantizeParams { raw: unsafe { raw.assume_init() } }
    }
    /// Per block (default) or per token.
    pub fn granularity(mut self, g: Granularity) -> Self {
        self.raw.granularity = g.to_raw();
        self
    }
    /// Subtract the per-channel mean over tokens first (then a `mean` output is required).
    pub fn smooth(mut self, smooth: bool) -> Self {
        self.raw.smooth = smooth as i32;
        self
    }
    /// Scale multiplier in (0, 1].
    pub fn scale_multiplier(mut self, m: f32) -> Self {
        self.raw.scale_multiplier = m;
        self
    }
    /// CUDA stream for GPU tensors.
    ///
    /// # Safety
    /// `stream` must be a valid stream of the tensors' device (or NULL).
    pub unsafe fn stream(mut self, stream: *mut c_void) -> Self {
        self.raw.stream = stream;
        self
    }
    /// The C struct.
    pub fn as_raw(&self) -> &sys::int8attn_quantize_params_t {
        &self.raw
    }
}

/// Options of [`Context::predict_block_mask`](crate::Context::predict_block_mask)
/// (`int8attn_mask_params_t`).
#[derive(Clone, Debug)]
pub struct MaskParams {
    raw: sys::int8attn_mask_params_t,
}

impl Default for MaskParams {
    fn default() -> Self {
        Self::new()
    }
}

impl MaskParams {
    /// The library's defaults ([`sys::INT8ATTN_MASK_Q_BLOCK_DEFAULT`] ×
    /// [`sys::INT8ATTN_MASK_K_BLOCK_DEFAULT`] blocks, threshold 0.95).
    pub fn new() -> Self {
        let mut raw = std::mem::MaybeUninit::<sys::int8attn_mask_params_t>::zeroed();
        // SAFETY: init writes the whole struct.
        unsafe { sys::int8attn_mask_params_init(raw.as_mut_ptr()) };
        MaskParams { raw: unsafe { raw.assume_init() } }
    }
    /// Block size (query rows, keys).
    pub fn blocks(mut self, q_block: i32, k_block: i32) -> Self {
        self.raw.q_block = q_block;
        self.raw.k_block = k_block;
        self
    }
    /// Keep the top ⌈ratio·nkb⌉ key blocks per query block.
    pub fn keep_ratio(mut self, ratio: f32) -> Self {
        self.raw.keep_ratio = ratio;
        self
    }
    /// Keep the smallest set of key blocks whose pooled softmax mass reaches `t`.
    pub fn threshold(mut self, t: f32) -> Self {
        self.raw.threshold = t;
        self
    }
    /// Never keep blocks entirely above the causal diagonal.
    pub fn causal(mut self, causal: bool) -> Self {
        self.raw.causal = causal as i32;
        self
    }
    /// Softmax scale for the pooled scores (0 = 1/sqrt(D)).
    pub fn sm_scale(mut self, s: f32) -> Self {
        self.raw.sm_scale = s;
        self
    }
    /// CUDA stream for GPU tensors.
    ///
    /// # Safety
    /// `stream` must be a valid stream of the tensors' device (or NULL).
    pub unsafe fn stream(mut self, stream: *mut c_void) -> Self {
        self.raw.stream = stream;
        self
    }
    /// The C struct.
    pub fn as_raw(&self) -> &sys::int8attn_mask_params_t {
        &self.raw
    }
}

/// Options of [`Context::rotary`](crate::Context::rotary) (`int8attn_rotary_params_t`).
#[derive(Clone, Debug)]
pub struct RotaryParams {
    raw: sys::int8attn_rotary_params_t,
}

impl Default for RotaryParams {
    fn default() -> Self {
        Self::new()
    }
}

impl RotaryParams {
    /// The library's defaults (the default stream).
    pub fn new() -> Self {
        let mut raw = std::mem::MaybeUninit::<sys::int8attn_rotary_params_t>::zeroed();
        // SAFETY: init writes the whole struct.
        unsafe { sys::int8attn_rotary_params_init(raw.as_mut_ptr()) };
        RotaryParams { raw: unsafe { raw.assume_init() } }
    }
    /// How a pair's rotation is evaluated (default [`RotaryArithmetic::Rounded`]).
    pub fn arithmetic(mut self, arithmetic: RotaryArithmetic) -> Self {
        self.raw.arithmetic = arithmetic.to_raw();
        self
    }
    /// CUDA stream for GPU tensors.
    ///
    /// # Safety
    /// `stream` must be a valid stream of the tensors' device (or NULL).
    pub unsafe fn stream(mut self, stream: *mut c_void) -> Self {
        self.raw.stream = stream;
        self
    }
    /// The C struct.
    pub fn as_raw(&self) -> &sys::int8attn_rotary_params_t {
        &self.raw
    }
}

/// Options of [`Context::rms_norm`](crate::Context::rms_norm) (`int8attn_rms_norm_params_t`).
#[derive(Clone, Debug)]
pub struct RmsNormParams {
    raw: sys::int8attn_rms_norm_params_t,
}

impl Default for RmsNormParams {
    fn default() -> Self {
        Self::new()
    }
}

impl RmsNormParams {
    /// The library's defaults (eps 1e-6, the default stream).
    pub fn new() -> Self {
        let mut raw = std::mem::MaybeUninit::<sys::int8attn_rms_norm_params_t>::zeroed();
        // SAFETY: init writes the whole struct.
        unsafe { sys::int8attn_rms_norm_params_init(raw.as_mut_ptr()) };
        RmsNormParams { raw: unsafe { raw.assume_init() } }
    }
    /// Added to the mean square before the root; finite and ≥ 0 (default 1e-6).
    pub fn eps(mut self, eps: f32) -> Self {
        self.raw.eps = eps;
        self
    }
    /// CUDA stream for GPU tensors.
    ///
    /// # Safety
    /// `stream` must be a valid stream of the tensors' device (or NULL).
    pub unsafe fn stream(mut self, stream: *mut c_void) -> Self {
        self.raw.stream = stream;
        self
    }
    /// The C struct.
    pub fn as_raw(&self) -> &sys::int8attn_rms_norm_params_t {
        &self.raw
    }
}
