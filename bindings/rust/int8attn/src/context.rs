//! The context: the object every computation runs through.

use crate::cache::{KvCache, KvCacheOptions};
use crate::error::{check, Error, Result, Status};
use crate::params::{ForwardParams, MaskParams, QuantizeParams, RmsNormParams, RotaryParams};
use crate::tensor::{TensorView, TensorViewMut};
use crate::types::DeviceType;
use int8attn_sys as sys;
use std::os::raw::c_void;
use std::ptr::{self, NonNull};

/// Check that the loaded library speaks the ABI these bindings were generated for.
pub fn check_abi() -> Result<()> {
    // SAFETY: no preconditions.
    let loaded = unsafe { sys::int8attn_abi_version() };
    if loaded != sys::INT8ATTN_ABI_VERSION {
        return Err(Error::new(
            Status::ABI_MISMATCH,
            format!(
                "the loaded libint8attn has ABI version {} but these bindings were generated for ABI {}; \
                 use a matching library (check INT8ATTN_LIB_DIR / LD_LIBRARY_PATH) or update the crate",
                loaded,
                sys::INT8ATTN_ABI_VERSION
            ),
        ));
    }
    Ok(())
}

/// A context (`int8attn_context_t`): device binding, workspace and CPU thread pool.
///
/// # Thread safety
/// The header says calls that take the same context must not run concurrently, and different
/// contexts are independent. So `Context` is `Send` (move it to another thread) but not `Sync`
/// (it cannot be shared between threads); use one context per thread. Every method takes
/// `&self`, which the missing `Sync` makes safe.
///
/// ```compile_fail
/// fn needs_sync<T: Sync>() {}
/// needs_sync::<int8attn::Context>();
/// ```
pub struct Context {
    raw: NonNull<sys::int8attn_context_t>,
}

// SAFETY: a context may be used from any thread as long as calls are not concurrent; without
// Sync, a Context is only ever used by the one thread that owns it.
unsafe impl Send for Context {}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: we own the handle; KvCache borrows the context, so none outlives it.
        unsafe { sys::int8attn_context_destroy(self.raw.as_ptr()) }
    }
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").field("raw", &self.raw).finish()
    }
}

/// Options of [`Context::with_options`] (`int8attn_context_params_t`).
#[derive(Clone, Debug)]
pub struct ContextOptions {
    raw: sys::int8attn_context_params_t,
}

impl Default for ContextOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl ContextOptions {
    /// The library's defaults (device 0, all hardware threads, workspace on first use).
    pub fn new() -> Self {
        let mut raw = std::mem::MaybeUninit::<sys::int8attn_context_params_t>::zeroed();
        // SAFETY: init writes the whole struct.
        unsafe { sys::int8attn_context_params_init(raw.as_mut_ptr()) };
        ContextOptions { raw: unsafe { raw.assume_init() } }
    }
    /// The CUDA device this context serves.
    pub fn device_id(mut self, id: i32) -> Self {
        self.raw.device_id = id;
        self
    }
    /// CPU worker threads (0 = all hardware threads).
    pub fn num_threads(mut self, n: i32) -> Self {
        self.raw.num_threads = n;
        self
    }
    /// Device workspace to allocate up front.
    pub fn workspace_bytes(mut self, bytes: u64) -> Self {
        self.raw.workspace_bytes = bytes;
        self
    }
    /// The C struct.
    pub fn as_raw(&self) -> &sys::int8attn_context_params_t {
        &self.raw
    }
}

impl Context {
    /// A context with the default options. Checks the library's ABI version first.
    pub fn new() -> Result<Context> {
        Self::with_options(&ContextOptions::new())
    }

    /// A context with explicit options. Checks the library's ABI version first.
    pub fn with_options(options: &ContextOptions) -> Result<Context> {
        check_abi()?;
        let mut handle: *mut sys::int8attn_context_t = ptr::null_mut();
        // SAFETY: valid out-pointer and params.
        check(unsafe { sys::int8attn_context_create(&mut handle, &options.raw) })?;
        NonNull::new(handle)
            .map(|raw| Context { raw })
            .ok_or_else(|| Error::new(Status::INTERNAL, "int8attn_context_create returned OK and NULL"))
    }

    /// The C handle (still owned by this object).
    pub fn as_raw(&self) -> *mut sys::int8attn_context_t {
        self.raw.as_ptr()
    }

    /// Attention `O = softmax(sm_scale·Q·Kᵀ + mask)·V` (`int8attn_forward`).
    ///
    /// Q is `[B, Hq, Nq, D]`, K and V `[B, Hkv, Nk, D]` with Hq a multiple of Hkv, O is
    /// `[B, Hq, Nq, D]`. On error nothing has been written to `o` (or the LSE output).
    /// GPU work is asynchronous on the params' stream.
    pub fn attention(
        &self,
        q: &TensorView<'_>,
        k: &TensorView<'_>,
        v: &TensorView<'_>,
        o: &mut TensorViewMut<'_>,
        params: &ForwardParams<'_>,
    ) -> Result<()> {
        // SAFETY: all descriptors are valid for the call; the borrows guarantee the memory is
        // alive and that `o` is not aliased by Rust references.
        check(unsafe {
            sys::int8attn_forward(self.as_raw(), q.as_raw(), k.as_raw(), v.as_raw(), o.as_raw(), params.as_raw())
        })
    }

    /// Workspace bytes [`Context::attention`] needs for these tensors and options.
    pub fn attention_workspace_size(
        &self,
        q: &TensorView<'_>,
        k: &TensorView<'_>,
        v: &TensorView<'_>,
        params: &ForwardParams<'_>,
    ) -> Result<u64> {
        let mut bytes = 0u64;
        // SAFETY: valid descriptors and out-pointer.
        check(unsafe {
            sys::int8attn_forward_workspace_size(
                &mut bytes,
                self.as_raw(),
                q.as_raw(),
                k.as_raw(),
                v.as_raw(),
                params.as_raw(),
            )
        })?;
        Ok(bytes)
    }

    /// Attention of `q` against the first `cache.len()` tokens of a K/V cache
    /// (`int8attn_kv_cache_forward`); `params.mode` must be Default or the cache's mode.
    pub fn attention_cached(
        &self,
        q: &TensorView<'_>,
        cache: &KvCache<'_>,
        o: &mut TensorViewMut<'_>,
        params: &ForwardParams<'_>,
    ) -> Result<()> {
        // SAFETY: valid handles and descriptors.
        check(unsafe {
            sys::int8attn_kv_cache_forward(self.as_raw(), q.as_raw(), cache.as_raw(), o.as_raw(), params.as_raw())
        })
    }

    /// Quantize `x [B, H, N, D]` to int8 with the library's maths (`int8attn_quantize`).
    /// `scales` is float32 `[B, H, G]` (G = ⌈N / [`sys::INT8ATTN_QUANT_BLOCK`]⌉ per block, N per
    /// token); `mean` is float32 `[B, H, D]` and required when `params.smooth(true)`.
    pub fn quantize(
        &self,
        x: &TensorView<'_>,
        x_int8: &mut TensorViewMut<'_>,
        scales: &mut TensorViewMut<'_>,
        mean: Option<&mut TensorViewMut<'_>>,
        params: &QuantizeParams,
    ) -> Result<()> {
        let mean_ptr = mean.map(|m| m.as_raw() as *const _).unwrap_or(ptr::null());
        // SAFETY: valid descriptors (mean may be NULL).
        check(unsafe {
            sys::int8attn_quantize(self.as_raw(), x.as_raw(), x_int8.as_raw(), scales.as_raw(), mean_ptr, params.as_raw())
        })
    }

    /// Rotate the interleaved channel pairs of `x [B, H, N, D]` by token n's angles
    /// (`int8attn_rotary`): `out[2i] = x[2i]·cos[n][2i] − x[2i+1]·sin[n][2i]`,
    /// `out[2i+1] = x[2i+1]·cos[n][2i+1] + x[2i]·sin[n][2i+1]` in float32 with the rounding
    /// steps of [`RotaryParams::arithmetic`] (by default each product and sum rounded on its
    /// own), the result to `out`'s dtype (x's). `cos` and `sin` are float32 `[N, D]`.
    pub fn rotary(
        &self,
        x: &TensorView<'_>,
        cos: &TensorView<'_>,
        sin: &TensorView<'_>,
        out: &mut TensorViewMut<'_>,
        params: &RotaryParams,
    ) -> Result<()> {
        // SAFETY: valid descriptors.
        check(unsafe {
            sys::int8attn_rotary(self.as_raw(), x.as_raw(), cos.as_raw(), sin.as_raw(), out.as_raw(), params.as_raw())
        })
    }

    /// RMS-normalize each row of `x [B, H, N, D]` over its D channels (`int8attn_rms_norm`):
    /// `r = 1 / sqrt(mean(x²) + eps)`, `y = x·r`, times the per-channel `weight [D]` when given
    /// (fp16/bf16/fp32; with a 16-bit weight y is first rounded to its dtype), the result rounded
    /// to `out`'s dtype (any of fp16/bf16/fp32), bit-identical on every backend. For the
    /// normalization in place use [`Context::rms_norm_in_place`].
    pub fn rms_norm(
        &self,
        x: &TensorView<'_>,
        weight: Option<&TensorView<'_>>,
        out: &mut TensorViewMut<'_>,
        params: &RmsNormParams,
    ) -> Result<()> {
        let weight_ptr = weight.map(|w| w.as_raw() as *const _).unwrap_or(ptr::null());
        // SAFETY: valid descriptors (weight may be NULL).
        check(unsafe { sys::int8attn_rms_norm(self.as_raw(), x.as_raw(), weight_ptr, out.as_raw(), params.as_raw()) })
    }

    /// [`Context::rms_norm`] in place: `x` is overwritten with its normalized rows (same dtype).
    pub fn rms_norm_in_place(
        &self,
        x: &mut TensorViewMut<'_>,
        weight: Option<&TensorView<'_>>,
        params: &RmsNormParams,
    ) -> Result<()> {
        let weight_ptr = weight.map(|w| w.as_raw() as *const _).unwrap_or(ptr::null());
        // SAFETY: valid descriptors (weight may be NULL); x as both input and output is the
        // header's in-place case (same data, strides and dtype).
        check(unsafe { sys::int8attn_rms_norm(self.as_raw(), x.as_raw(), weight_ptr, x.as_raw(), params.as_raw()) })
    }

    /// Predict a uint8 block mask `[B, Hq, ⌈Nq/q_block⌉, ⌈Nk/k_block⌉]` from pooled Q and K
    /// (`int8attn_predict_block_mask`); pass it to [`ForwardParams::block_mask`] with the same
    /// block sizes.
    pub fn predict_block_mask(
        &self,
        q: &TensorView<'_>,
        k: &TensorView<'_>,
        mask: &mut TensorViewMut<'_>,
        params: &MaskParams,
    ) -> Result<()> {
        // SAFETY: valid descriptors.
        check(unsafe { sys::int8attn_predict_block_mask(self.as_raw(), q.as_raw(), k.as_raw(), mask.as_raw(), params.as_raw()) })
    }

    /// Make the context's own workspace at least `bytes` large now (before capturing a CUDA
    /// graph: a call being captured cannot grow it).
    pub fn reserve_workspace(&self, device: DeviceType, bytes: u64) -> Result<()> {
        // SAFETY: valid handle.
        check(unsafe { sys::int8attn_context_reserve_workspace(self.as_raw(), device.to_raw(), bytes) })
    }

    /// Wait for the work queued on the legacy default stream (a no-op without CUDA).
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: NULL is the legacy default stream.
        check(unsafe { sys::int8attn_synchronize(self.as_raw(), ptr::null_mut()) })
    }

    /// Wait for the work queued on `stream`.
    ///
    /// # Safety
    /// `stream` must be a valid `cudaStream_t` of this context's device, or NULL.
    pub unsafe fn synchronize_stream(&self, stream: *mut c_void) -> Result<()> {
        check(sys::int8attn_synchronize(self.as_raw(), stream))
    }

    /// Create an empty quantized K/V cache tied to this context.
    pub fn kv_cache(&self, options: &KvCacheOptions) -> Result<KvCache<'_>> {
        KvCache::new(self, options)
    }
}
