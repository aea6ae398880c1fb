//! Safe Rust API of **int8attn**: attention `O = softmax(sm_scale·Q·Kᵀ + mask)·V` with
//! INT8-quantized Q·Kᵀ, for diffusion transformers and KV-cache decode, on CUDA GPUs and the CPU.
//!
//! This crate wraps the C library through [`int8attn_sys`]: handles ([`Context`], [`Policy`],
//! [`KvCache`]) are freed on drop, every fallible call returns [`Result`] whose [`Error`]
//! carries the library's status and its message, host data is passed as borrowed slices through
//! [`TensorView`] / [`TensorViewMut`], device memory through their `unsafe` raw-pointer
//! constructors.
//!
//! # Example
//! ```
//! use int8attn::{Context, ForwardParams, Mode, TensorView, TensorViewMut};
//!
//! # fn main() -> Result<(), int8attn::Error> {
//! let (b, h, n, d) = (1i64, 2i64, 70i64, 40i64);
//! let len = (b * h * n * d) as usize;
//! let q: Vec<f32> = (0..len).map(|i| (0.37 * i as f32 + 1.0).sin()).collect();
//! let k: Vec<f32> = (0..len).map(|i| (0.37 * i as f32 + 2.0).sin()).collect();
//! let v: Vec<f32> = (0..len).map(|i| (0.37 * i as f32 + 3.0).sin()).collect();
//! let mut o = vec![0f32; len];
//!
//! let ctx = Context::new()?; // also checks the library's ABI version
//! let shape = [b, h, n, d];  // logical [B, H, N, D]; NHD memory is a matter of strides
//! ctx.attention(
//!     &TensorView::from_slice(&q, &shape)?,
//!     &TensorView::from_slice(&k, &shape)?,
//!     &TensorView::from_slice(&v, &shape)?,
//!     &mut TensorViewMut::from_slice(&mut o, &shape)?,
//!     &ForwardParams::new().mode(Mode::Balanced),
//! )?;
//! assert!(o.iter().all(|x| x.is_finite()));
//!
//! // Errors carry the status and the library's message.
//! let bad = TensorView::from_slice(&q[..(b * h * n * 10) as usize], &[b, h, n, 10])?;
//! let err = ctx
//!     .attention(&bad, &bad, &bad, &mut TensorViewMut::from_slice(&mut o, &[b, h, n, 10])?,
//!                &ForwardParams::new())
//!     .unwrap_err();
//! assert_eq!(err.status, int8attn::Status::UNSUPPORTED_HEAD_DIM);
//! println!("{}", err); // int8attn: ...: q: shape[3] (head dim) is 10; ...
//! # Ok(())
//! # }
//! ```
//!
//! # Finding the library
//! `int8attn-sys` links `libint8attn` from `INT8ATTN_LIB_DIR`, `INT8ATTN_DIR` or pkg-config;
//! at run time the dynamic loader must find it (rpath, `LD_LIBRARY_PATH` or a system path).
//!
//! # Threads
//! The Rust types encode the header's thread-safety rules: [`Context`] is `Send` but not `Sync`
//! (one thread at a time per context); [`Policy`] is `Send + Sync` (concurrent reads; changes
//! need `&mut`); [`KvCache`] borrows its context, so it is neither, and its writes need `&mut`.
//! Errors are read from the failing thread's `int8attn_last_error()` right after the call.
#![warn(missing_docs)]

mod cache;
mod context;
mod error;
pub mod half;
mod params;
mod policy;
mod tensor;
mod types;

pub use cache::{KvCache, KvCacheOptions};
pub use context::{check_abi, Context, ContextOptions};
pub use error::{Error, Result, Status};
pub use params::{ForwardParams, MaskParams, QuantizeParams, RmsNormParams, RotaryParams};
pub use policy::{Policy, PolicyBuilder};
pub use tensor::{contiguous_strides, nhd_strides, HostElement, TensorView, TensorViewMut, MAX_RANK};
pub use types::{Device, DeviceType, Dtype, Features, Flags, Granularity, Mode, RotaryArithmetic};

/// The raw FFI crate, re-exported.
pub use int8attn_sys as sys;

use error::{c_str_lossy, check};

/// The ABI version these bindings were generated for (`INT8ATTN_ABI_VERSION`).
pub const ABI_VERSION: u32 = sys::INT8ATTN_ABI_VERSION;

/// Version number of the loaded library (major·10000 + minor·100 + patch).
pub fn version_number() -> u32 {
    // SAFETY: no preconditions.
    unsafe { sys::int8attn_version_number() }
}

/// Version string of the loaded library, e.g. "0.1.0".
pub fn version() -> String {
    // SAFETY: returns a static string.
    unsafe { c_str_lossy(sys::int8attn_version_string()) }
}

/// ABI version of the loaded library; compare with [`ABI_VERSION`] (see [`check_abi`]).
pub fn abi_version() -> u32 {
    // SAFETY: no preconditions.
    unsafe { sys::int8attn_abi_version() }
}

/// Backends and GPU architectures of the loaded library.
pub fn features() -> Features {
    // SAFETY: no preconditions.
    Features(unsafe { sys::int8attn_features() })
}

/// Number of usable CUDA devices (0 without CUDA, driver or device).
pub fn device_count() -> Result<i32> {
    let mut n = 0i32;
    // SAFETY: valid out-pointer.
    check(unsafe { sys::int8attn_device_count(&mut n) })?;
    Ok(n)
}

/// A description of CUDA device `id`, e.g. "NVIDIA H100 80GB HBM3, sm_90, 132 SMs".
pub fn device_describe(id: i32) -> Result<String> {
    let mut buf = vec![0u8; 256];
    // SAFETY: buffer and its size.
    check(unsafe { sys::int8attn_device_describe(buf.as_mut_ptr() as *mut _, buf.len(), id) })?;
    let end = buf.iter().position(|&c| c == 0).unwrap_or(buf.len());
    Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send<T: Send>() {}
    fn assert_sync<T: Sync>() {}

    #[test]
    fn thread_safety_markers() {
        assert_send::<Context>();
        assert_send::<Policy>();
        assert_sync::<Policy>();
        assert_send::<TensorView<'static>>();
        assert_send::<Error>();
        assert_sync::<Error>();
    }

    #[test]
    fn flags_and_status() {
        let f = Flags::SMOOTH_K | Flags::BALANCE_CHANNELS;
        assert!(f.contains(Flags::SMOOTH_K));
        assert!(!f.contains(Flags::SMOOTH_V));
        assert!(Status::BAD_SHAPE.is_invalid_argument());
        assert!(Status::UNSUPPORTED_HEAD_DIM.is_not_supported());
        assert_eq!(Status::BAD_SHAPE.code(), 102);
        assert_eq!(format!("{:?}", Status::BAD_SHAPE), "Status::BAD_SHAPE(102)");
        assert_eq!(format!("{:?}", Status::INVALID_HANDLE), "Status::INVALID_HANDLE(113)");
        assert!(Status::INVALID_HANDLE.is_invalid_argument());
        let e = Error::new(Status::BAD_VALUE, "x is NaN");
        assert!(e.to_string().contains("x is NaN"));
    }

    #[test]
    fn enum_round_trips() {
        for m in [Mode::Default, Mode::Exact, Mode::Balanced, Mode::Fast] {
            assert_eq!(Mode::from_raw(m.to_raw()), Some(m));
        }
        for d in [Dtype::F16, Dtype::Bf16, Dtype::F32, Dtype::I8, Dtype::I32, Dtype::U8, Dtype::Fp8E4m3] {
            assert_eq!(Dtype::from_raw(d.to_raw()), Some(d));
        }
        assert_eq!(Mode::from_raw(99), None);
    }
}
