//! Tensor views: borrowed host slices or raw device pointers described as `int8attn_tensor_t`.

use crate::error::{Error, Result, Status};
use crate::types::{Device, Dtype};
use int8attn_sys as sys;
use std::marker::PhantomData;
use std::os::raw::c_void;

/// Largest rank of a tensor (`INT8ATTN_MAX_RANK`).
pub const MAX_RANK: usize = sys::INT8ATTN_MAX_RANK as usize;

/// Host element types that map to exactly one [`Dtype`]. fp16 and bf16 data are `u16` bit
/// patterns and use [`TensorView::from_f16_bits`] / [`TensorView::from_bf16_bits`] instead.
///
/// # Safety
/// `DTYPE.size()` must equal `size_of::<Self>()`.
pub unsafe trait HostElement: Copy + 'static {
    /// The dtype of this element type.
    const DTYPE: Dtype;
}
unsafe impl HostElement for f32 {
    const DTYPE: Dtype = Dtype::F32;
}
unsafe impl HostElement for i8 {
    const DTYPE: Dtype = Dtype::I8;
}
unsafe impl HostElement for i32 {
    const DTYPE: Dtype = Dtype::I32;
}
unsafe impl HostElement for u8 {
    const DTYPE: Dtype = Dtype::U8;
}

/// Row-major strides for `shape`.
pub fn contiguous_strides(shape: &[i64]) -> Vec<i64> {
    let mut strides = vec![0i64; shape.len()];
    let mut acc: i64 = 1;
    for i in (0..shape.len()).rev() {
        strides[i] = acc;
        acc = acc.saturating_mul(shape[i].max(1));
    }
    strides
}

/// Strides of the "NHD" layout (`[B, N, H, D]` in memory) for the logical shape `[B, H, N, D]`.
pub fn nhd_strides(b_h_n_d: [i64; 4]) -> [i64; 4] {
    let [_, h, n, d] = b_h_n_d;
    [n * h * d, d, h * d, 1]
}

fn make_raw(
    data: *mut c_void,
    device: Device,
    dtype: Dtype,
    shape: &[i64],
    strides: &[i64],
) -> Result<sys::int8attn_tensor_t> {
    if shape.is_empty() || shape.len() > MAX_RANK {
        return Err(Error::new(
            Status::BAD_SHAPE,
            format!("tensor rank is {}; it must be in [1, {}]", shape.len(), MAX_RANK),
        ));
    }
    if strides.len() != shape.len() {
        return Err(Error::new(
            Status::BAD_STRIDE,
            format!("{} strides given for a tensor of rank {}", strides.len(), shape.len()),
        ));
    }
    let mut raw = sys::int8attn_tensor_t {
        data,
        device_type: device.device_type().to_raw(),
        device_id: device.id(),
        dtype: dtype.to_raw(),
        rank: shape.len() as i32,
        shape: [0; MAX_RANK],
        strides: [0; MAX_RANK],
    };
    raw.shape[..shape.len()].copy_from_slice(shape);
    raw.strides[..strides.len()].copy_from_slice(strides);
    Ok(raw)
}

/// Check that every element the view can address lies inside a slice of `len` elements.
/// Returns the number of elements spanned (max offset + 1, or 0 for an empty tensor).
pub(crate) fn check_extent(len: usize, shape: &[i64], strides: &[i64]) -> Result<usize> {
    let mut max_offset: i64 = 0;
    for (i, (&n, &s)) in shape.iter().zip(strides.iter()).enumerate() {
        if n < 0 {
            return Err(Error::new(Status::BAD_SHAPE, format!("shape[{}] is {}; sizes must not be negative", i, n)));
        }
        if s < 0 {
            return Err(Error::new(Status::BAD_STRIDE, format!("strides[{}] is {}; strides must not be negative", i, s)));
        }
        if n == 0 {
            return Ok(0);
        }
        let term = (n - 1).checked_mul(s).ok_or_else(|| {
            Error::new(Status::SIZE_OVERFLOW, format!("shape[{}]·strides[{}] = {}·{} overflows", i, i, n - 1, s))
        })?;
        max_offset = max_offset
            .checked_add(term)
            .ok_or_else(|| Error::new(Status::SIZE_OVERFLOW, "the tensor's extent overflows 64 bits"))?;
    }
    let needed = (max_offset as u64) + 1;
    if needed > len as u64 {
        return Err(Error::new(
            Status::BAD_SHAPE,
            format!(
                "host slice has {} elements but shape {:?} with strides {:?} addresses {}",
                len, shape, strides, needed
            ),
        ));
    }
    Ok(needed as usize)
}

macro_rules! common_accessors {
    () => {
        /// The C descriptor.
        pub fn as_raw(&self) -> &sys::int8attn_tensor_t {
            &self.raw
        }
        /// Sizes of the dimensions.
        pub fn shape(&self) -> &[i64] {
            &self.raw.shape[..self.raw.rank as usize]
        }
        /// Strides in elements.
        pub fn strides(&self) -> &[i64] {
            &self.raw.strides[..self.raw.rank as usize]
        }
        /// Number of dimensions.
        pub fn rank(&self) -> usize {
            self.raw.rank as usize
        }
        /// Element type.
        pub fn dtype(&self) -> Dtype {
            Dtype::from_raw(self.raw.dtype).expect("constructed with a known dtype")
        }
        /// Where the data lives.
        pub fn device(&self) -> Device {
            Device::from_raw(self.raw.device_type, self.raw.device_id).expect("constructed with a known device")
        }
        /// Pointer to the first element.
        pub fn data_ptr(&self) -> *mut c_void {
            self.raw.data
        }
    };
}

/// A read-only strided view of tensor memory (an input: Q, K, V, valid lengths, block masks).
///
/// Host views borrow a slice and are checked on construction so that every addressable element
/// lies inside it; device views come from raw pointers through an `unsafe` constructor.
#[derive(Clone, Copy, Debug)]
pub struct TensorView<'a> {
    raw: sys::int8attn_tensor_t,
    _data: PhantomData<&'a [u8]>,
}

// SAFETY: a TensorView is a shared borrow of plain data (or a raw device pointer the creator
// vouched for); moving or sharing the descriptor between threads is no different from a &[T].
unsafe impl Send for TensorView<'_> {}
unsafe impl Sync for TensorView<'_> {}

impl<'a> TensorView<'a> {
    /// A contiguous (row-major) view of a host slice; attention tensors are `[B, H, N, D]`.
    pub fn from_slice<T: HostElement>(data: &'a [T], shape: &[i64]) -> Result<Self> {
        Self::strided(data, shape, &contiguous_strides(shape))
    }

    /// A strided view of a host slice (strides in elements; 0 broadcasts).
    pub fn strided<T: HostElement>(data: &'a [T], shape: &[i64], strides: &[i64]) -> Result<Self> {
        Self::host(data.as_ptr() as *mut c_void, data.len(), T::DTYPE, shape, strides)
    }

    /// A view of fp16 data given as IEEE binary16 bit patterns; `strides` = `None` is row-major.
    pub fn from_f16_bits(data: &'a [u16], shape: &[i64], strides: Option<&[i64]>) -> Result<Self> {
        let s = strides.map(|s| s.to_vec()).unwrap_or_else(|| contiguous_strides(shape));
        Self::host(data.as_ptr() as *mut c_void, data.len(), Dtype::F16, shape, &s)
    }

    /// A view of bfloat16 data given as bit patterns; `strides` = `None` is row-major.
    pub fn from_bf16_bits(data: &'a [u16], shape: &[i64], strides: Option<&[i64]>) -> Result<Self> {
        let s = strides.map(|s| s.to_vec()).unwrap_or_else(|| contiguous_strides(shape));
        Self::host(data.as_ptr() as *mut c_void, data.len(), Dtype::Bf16, shape, &s)
    }

    fn host(ptr: *mut c_void, len: usize, dtype: Dtype, shape: &[i64], strides: &[i64]) -> Result<Self> {
        let raw = make_raw(ptr, Device::Cpu, dtype, shape, strides)?;
        check_extent(len, shape, strides)?;
        Ok(TensorView { raw, _data: PhantomData })
    }

    /// A view of memory given by a raw pointer: device memory (e.g. from a CUDA allocator or a
    /// framework tensor) or host memory not held in a slice. `strides` = `None` is row-major.
    ///
    /// # Safety
    /// `data` must point to memory on `device` of the given dtype that holds every element the
    /// shape and strides address, and it must stay valid and unmodified by others for `'a`
    /// (and, for asynchronous GPU calls, until the work queued on the stream has finished).
    pub unsafe fn from_raw_parts(
        data: *const c_void,
        device: Device,
        dtype: Dtype,
        shape: &[i64],
        strides: Option<&[i64]>,
    ) -> Result<Self> {
        let s = strides.map(|s| s.to_vec()).unwrap_or_else(|| contiguous_strides(shape));
        let raw = make_raw(data as *mut c_void, device, dtype, shape, &s)?;
        Ok(TensorView { raw, _data: PhantomData })
    }

    common_accessors!();
}

/// A writable strided view of tensor memory (an output: O, LSE, quantized data, scales, masks).
#[derive(Debug)]
pub struct TensorViewMut<'a> {
    raw: sys::int8attn_tensor_t,
    _data: PhantomData<&'a mut [u8]>,
}

// SAFETY: like &mut [T].
unsafe impl Send for TensorViewMut<'_> {}
unsafe impl Sync for TensorViewMut<'_> {}

impl<'a> TensorViewMut<'a> {
    /// A contiguous view of a mutable host slice.
    pub fn from_slice<T: HostElement>(data: &'a mut [T], shape: &[i64]) -> Result<Self> {
        Self::strided(data, shape, &contiguous_strides(shape))
    }

    /// A strided view of a mutable host slice. Strides must not make elements overlap (the
    /// library rejects outputs whose strides overlap).
    pub fn strided<T: HostElement>(data: &'a mut [T], shape: &[i64], strides: &[i64]) -> Result<Self> {
        Self::host(data.as_mut_ptr() as *mut c_void, data.len(), T::DTYPE, shape, strides)
    }

    /// fp16 output as IEEE binary16 bit patterns; `strides` = `None` is row-major.
    pub fn from_f16_bits(data: &'a mut [u16], shape: &[i64], strides: Option<&[i64]>) -> Result<Self> {
        let s = strides.map(|s| s.to_vec()).unwrap_or_else(|| contiguous_strides(shape));
        Self::host(data.as_mut_ptr() as *mut c_void, data.len(), Dtype::F16, shape, &s)
    }

    /// bfloat16 output as bit patterns; `strides` = `None` is row-major.
    pub fn from_bf16_bits(data: &'a mut [u16], shape: &[i64], strides: Option<&[i64]>) -> Result<Self> {
        let s = strides.map(|s| s.to_vec()).unwrap_or_else(|| contiguous_strides(shape));
        Self::host(data.as_mut_ptr() as *mut c_void, data.len(), Dtype::Bf16, shape, &s)
    }

    fn host(ptr: *mut c_void, len: usize, dtype: Dtype, shape: &[i64], strides: &[i64]) -> Result<Self> {
        let raw = make_raw(ptr, Device::Cpu, dtype, shape, strides)?;
        check_extent(len, shape, strides)?;
        Ok(TensorViewMut { raw, _data: PhantomData })
    }

    /// A writable view of memory given by a raw pointer (device memory, typically).
    ///
    /// # Safety
    /// As [`TensorView::from_raw_parts`], and in addition nothing else may read or write the
    /// memory while the library writes it.
    pub unsafe fn from_raw_parts(
        data: *mut c_void,
        device: Device,
        dtype: Dtype,
        shape: &[i64],
        strides: Option<&[i64]>,
    ) -> Result<Self> {
        let s = strides.map(|s| s.to_vec()).unwrap_or_else(|| contiguous_strides(shape));
        let raw = make_raw(data, device, dtype, shape, &s)?;
        Ok(TensorViewMut { raw, _data: PhantomData })
    }

    /// A read-only view of the same memory, borrowing this one.
    pub fn as_view(&self) -> TensorView<'_> {
        TensorView { raw: self.raw, _data: PhantomData }
    }

    common_accessors!();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous_and_nhd_strides() {
        assert_eq!(contiguous_strides(&[2, 3, 4, 5]), vec![60, 20, 5, 1]);
        assert_eq!(nhd_strides([2, 3, 4, 5]), [60, 5, 15, 1]);
    }

    #[test]
    fn extent_checks() {
        assert_eq!(check_extent(120, &[2, 3, 4, 5], &[60, 20, 5, 1]).unwrap(), 120);
        let e = check_extent(119, &[2, 3, 4, 5], &[60, 20, 5, 1]).unwrap_err();
        assert_eq!(e.status, Status::BAD_SHAPE);
        assert!(e.message.contains("119"), "{}", e.message);
        // Broadcast stride 0 needs only one batch.
        assert_eq!(check_extent(60, &[2, 3, 4, 5], &[0, 20, 5, 1]).unwrap(), 60);
        assert_eq!(check_extent(0, &[0, 3], &[3, 1]).unwrap(), 0);
        assert_eq!(check_extent(10, &[2], &[-1]).unwrap_err().status, Status::BAD_STRIDE);
        assert_eq!(check_extent(10, &[-2], &[1]).unwrap_err().status, Status::BAD_SHAPE);
        assert_eq!(check_extent(10, &[i64::MAX], &[4]).unwrap_err().status, Status::SIZE_OVERFLOW);
    }

    #[test]
    fn views_describe_their_memory() {
        let data = vec![0f32; 2 * 3 * 4 * 8];
        let v = TensorView::from_slice(&data, &[2, 3, 4, 8]).unwrap();
        assert_eq!(v.shape(), &[2, 3, 4, 8]);
        assert_eq!(v.strides(), &[96, 32, 8, 1]);
        assert_eq!(v.dtype(), Dtype::F32);
        assert_eq!(v.device(), Device::Cpu);
        assert_eq!(v.data_ptr() as *const f32, data.as_ptr());
        assert!(TensorView::from_slice(&data[1..], &[2, 3, 4, 8]).is_err());
        assert!(TensorView::from_slice(&data, &[]).is_err());
        assert!(TensorView::from_slice(&data, &[1, 1, 1, 1, 1, 1, 1]).is_err());
        let bits = vec![0u16; 16];
        let h = TensorView::from_bf16_bits(&bits, &[2, 8], None).unwrap();
        assert_eq!(h.dtype(), Dtype::Bf16);
        let mut out = vec![0f32; 8];
        let o = TensorViewMut::from_slice(&mut out, &[1, 8]).unwrap();
        assert_eq!(o.as_view().shape(), &[1, 8]);
    }
}
