//! The persistent quantized K/V cache.

use crate::context::Context;
use crate::error::{check, Error, Result, Status};
use crate::params::ForwardParams;
use crate::tensor::{TensorView, TensorViewMut};
use crate::types::{DeviceType, Flags, Mode};
use int8attn_sys as sys;
use std::marker::PhantomData;
use std::os::raw::c_void;
use std::ptr::{self, NonNull};

/// Options of a [`KvCache`] (`int8attn_kv_cache_params_t`).
#[derive(Clone, Debug)]
pub struct KvCacheOptions {
    raw: sys::int8attn_kv_cache_params_t,
}

impl KvCacheOptions {
    /// A cache of `batch` sequences × `num_kv_heads` heads × up to `capacity` tokens of
    /// `head_dim` channels, with the library's defaults otherwise (device: CUDA when built and
    /// present, else CPU; mode balanced; K and V smoothing).
    pub fn new(batch: i64, num_kv_heads: i64, capacity: i64, head_dim: i64) -> Self {
        let mut raw = std::mem::MaybeUninit::<sys::int8attn_kv_cache_params_t>::zeroed();
        // SAFETY: init writes the whole struct.
        unsafe { sys::int8attn_kv_cache_params_init(raw.as_mut_ptr()) };
        let mut raw = unsafe { raw.assume_init() };
        raw.batch = batch;
        raw.num_kv_heads = num_kv_heads;
        raw.capacity = capacity;
        raw.head_dim = head_dim;
        KvCacheOptions { raw }
    }
    /// Where the cache lives.
    pub fn device(mut self, device: DeviceType) -> Self {
        self.raw.device_type = device.to_raw();
        self
    }
    /// [`Mode::Balanced`] (int8 K, fp16 V) or [`Mode::Fast`] (int8 K, FP8 V).
    pub fn mode(mut self, mode: Mode) -> Self {
        self.raw.mode = mode.to_raw();
        self
    }
    /// SMOOTH_K / SMOOTH_V.
    pub fn flags(mut self, flags: Flags) -> Self {
        self.raw.flags = flags.0;
        self
    }
    /// Stream for the initial device allocation.
    ///
    /// # Safety
    /// `stream` must be a valid `cudaStream_t` (or NULL) during creation.
    pub unsafe fn stream(mut self, stream: *mut c_void) -> Self {
        self.raw.stream = stream;
        self
    }
    /// The C struct.
    pub fn as_raw(&self) -> &sys::int8attn_kv_cache_params_t {
        &self.raw
    }
}

/// A quantized K/V cache (`int8attn_kv_cache_t`): quantize K/V once (text cross-attention),
/// or append as a sequence grows (LLM decode), and run attention against it.
///
/// It borrows the [`Context`] it was created with (the header requires the context to outlive
/// the cache, and appends use the context's resources). Since a `Context` is not `Sync`, the
/// cache is neither `Send` nor `Sync`: it stays on the context's thread. Writes (`append`,
/// `reset`) take `&mut self`, so they never overlap another use, as the header requires.
///
/// ```compile_fail
/// fn needs_send<T: Send>() {}
/// needs_send::<int8attn::KvCache<'static>>();
/// ```
pub struct KvCache<'ctx> {
    raw: NonNull<sys::int8attn_kv_cache_t>,
    _context: PhantomData<&'ctx Context>,
}

impl Drop for KvCache<'_> {
    fn drop(&mut self) {
        // SAFETY: we own the handle; the context is still alive (borrowed for 'ctx).
        unsafe { sys::int8attn_kv_cache_destroy(self.raw.as_ptr()) }
    }
}

impl std::fmt::Debug for KvCache<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KvCache").field("len", &self.len().ok()).finish()
    }
}

impl<'ctx> KvCache<'ctx> {
    /// Create an empty cache (length 0).
    pub fn new(context: &'ctx Context, options: &KvCacheOptions) -> Result<Self> {
        let mut handle: *mut sys::int8attn_kv_cache_t = ptr::null_mut();
        // SAFETY: valid out-pointer, context and params.
        check(unsafe { sys::int8attn_kv_cache_create(&mut handle, context.as_raw(), &options.raw) })?;
        NonNull::new(handle)
            .map(|raw| KvCache { raw, _context: PhantomData })
            .ok_or_else(|| Error::new(Status::INTERNAL, "int8attn_kv_cache_create returned OK and NULL"))
    }

    /// Current length (tokens per sequence).
    pub fn len(&self) -> Result<i64> {
        let mut n = 0i64;
        // SAFETY: valid handle and out-pointer.
        check(unsafe { sys::int8attn_kv_cache_length(&mut n, self.raw.as_ptr()) })?;
        Ok(n)
    }

    /// `true` when the cache holds no tokens.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Quantize `k` and `v` `[B, Hkv, n, D]` and append them; on error the cache is unchanged.
    pub fn append(&mut self, k: &TensorView<'_>, v: &TensorView<'_>) -> Result<()> {
        // SAFETY: valid handle and descriptors; &mut self excludes other uses.
        check(unsafe { sys::int8attn_kv_cache_append(self.raw.as_ptr(), k.as_raw(), v.as_raw(), ptr::null_mut()) })
    }

    /// [`KvCache::append`] on a CUDA stream.
    ///
    /// # Safety
    /// `stream` must be a valid `cudaStream_t` of the cache's device, or NULL.
    pub unsafe fn append_on_stream(&mut self, k: &TensorView<'_>, v: &TensorView<'_>, stream: *mut c_void) -> Result<()> {
        check(sys::int8attn_kv_cache_append(self.raw.as_ptr(), k.as_raw(), v.as_raw(), stream))
    }

    /// Set the length to 0 and forget the smoothing means.
    pub fn reset(&mut self) -> Result<()> {
        // SAFETY: valid handle.
        check(unsafe { sys::int8attn_kv_cache_reset(self.raw.as_ptr()) })
    }

    /// Attention of `q [B, Hq, Nq, D]` against the cache (same as
    /// [`Context::attention_cached`]).
    pub fn forward(
        &self,
        context: &Context,
        q: &TensorView<'_>,
        o: &mut TensorViewMut<'_>,
        params: &ForwardParams<'_>,
    ) -> Result<()> {
        context.attention_cached(q, self, o, params)
    }

    /// The C handle (still owned by this object).
    pub fn as_raw(&self) -> *const sys::int8attn_kv_cache_t {
        self.raw.as_ptr()
    }
}
