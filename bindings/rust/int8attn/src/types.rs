//! Small value types mirroring the header's enums and bit sets.

use int8attn_sys as sys;
use std::ops::{BitOr, BitOrAssign};

/// Precision mode (`int8attn_mode_values`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// The policy's mode for the timestep, else [`Mode::Balanced`].
    Default,
    /// fp16/bf16 (fp32 on the CPU) flash attention, no quantization.
    Exact,
    /// INT8 Q·Kᵀ (K smoothed), P·V in fp16 with fp32 accumulation.
    Balanced,
    /// INT8 Q·Kᵀ, P and V in FP8 E4M3 (emulated on the CPU), two-level fp32 accumulation.
    Fast,
}

impl Mode {
    /// The C value.
    pub fn to_raw(self) -> i32 {
        (match self {
            Mode::Default => sys::INT8ATTN_MODE_DEFAULT,
            Mode::Exact => sys::INT8ATTN_MODE_EXACT,
            Mode::Balanced => sys::INT8ATTN_MODE_BALANCED,
            Mode::Fast => sys::INT8ATTN_MODE_FAST,
        }) as i32
    }

    /// From the C value; `None` for values this crate does not know.
    pub fn from_raw(v: i32) -> Option<Mode> {
        match v as u32 {
            sys::INT8ATTN_MODE_DEFAULT => Some(Mode::Default),
            sys::INT8ATTN_MODE_EXACT => Some(Mode::Exact),
            sys::INT8ATTN_MODE_BALANCED => Some(Mode::Balanced),
            sys::INT8ATTN_MODE_FAST => Some(Mode::Fast),
            _ => None,
        }
    }
}

/// Element type of a tensor (`int8attn_dtype_values`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dtype {
    /// IEEE binary16 (host buffers: `u16` bit patterns).
    F16,
    /// bfloat16 (host buffers: `u16` bit patterns).
    Bf16,
    /// IEEE binary32.
    F32,
    /// int8 (quantized data).
    I8,
    /// int32 (valid lengths).
    I32,
    /// uint8 (block masks).
    U8,
    /// FP8 E4M3 (quantized V).
    Fp8E4m3,
}

impl Dtype {
    /// The C value.
    pub fn to_raw(self) -> i32 {
        (match self {
            Dtype::F16 => sys::INT8ATTN_DTYPE_F16,
            Dtype::Bf16 => sys::INT8ATTN_DTYPE_BF16,
            Dtype::F32 => sys::INT8ATTN_DTYPE_F32,
            Dtype::I8 => sys::INT8ATTN_DTYPE_I8,
            Dtype::I32 => sys::INT8ATTN_DTYPE_I32,
            Dtype::U8 => sys::INT8ATTN_DTYPE_U8,
            Dtype::Fp8E4m3 => sys::INT8ATTN_DTYPE_FP8_E4M3,
        }) as i32
    }

    /// From the C value.
    pub fn from_raw(v: i32) -> Option<Dtype> {
        match v as u32 {
            sys::INT8ATTN_DTYPE_F16 => Some(Dtype::F16),
            sys::INT8ATTN_DTYPE_BF16 => Some(Dtype::Bf16),
            sys::INT8ATTN_DTYPE_F32 => Some(Dtype::F32),
            sys::INT8ATTN_DTYPE_I8 => Some(Dtype::I8),
            sys::INT8ATTN_DTYPE_I32 => Some(Dtype::I32),
            sys::INT8ATTN_DTYPE_U8 => Some(Dtype::U8),
            sys::INT8ATTN_DTYPE_FP8_E4M3 => Some(Dtype::Fp8E4m3),
            _ => None,
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Dtype::F16 | Dtype::Bf16 => 2,
            Dtype::F32 | Dtype::I32 => 4,
            Dtype::I8 | Dtype::U8 | Dtype::Fp8E4m3 => 1,
        }
    }
}

/// Where a tensor's memory lives (device type and index).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Device {
    /// Host memory.
    Cpu,
    /// CUDA device memory on the given device index.
    Cuda(i32),
}

impl Device {
    /// The device type.
    pub fn device_type(self) -> DeviceType {
        match self {
            Device::Cpu => DeviceType::Cpu,
            Device::Cuda(_) => DeviceType::Cuda,
        }
    }

    /// The device index (0 for the CPU).
    pub fn id(self) -> i32 {
        match self {
            Device::Cpu => 0,
            Device::Cuda(id) => id,
        }
    }

    pub(crate) fn from_raw(device_type: i32, id: i32) -> Option<Device> {
        match device_type as u32 {
            sys::INT8ATTN_DEVICE_CPU => Some(Device::Cpu),
            sys::INT8ATTN_DEVICE_CUDA => Some(Device::Cuda(id)),
            _ => None,
        }
    }
}

/// A device type without an index (`int8attn_device_values`), for the K/V cache and workspaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceType {
    /// Host memory.
    Cpu,
    /// CUDA device memory.
    Cuda,
}

impl DeviceType {
    /// The C value.
    pub fn to_raw(self) -> i32 {
        (match self {
            DeviceType::Cpu => sys::INT8ATTN_DEVICE_CPU,
            DeviceType::Cuda => sys::INT8ATTN_DEVICE_CUDA,
        }) as i32
    }
}

/// Quantization scale granularity (`int8attn_granularity_values`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Granularity {
    /// Per token, for Q and for K.
    Default,
    /// One scale per [`sys::INT8ATTN_QUANT_BLOCK`] consecutive tokens of a head.
    PerBlock,
    /// One scale per token of a head.
    PerToken,
}

impl Granularity {
    /// The C value.
    pub fn to_raw(self) -> i32 {
        (match self {
            Granularity::Default => sys::INT8ATTN_GRANULARITY_DEFAULT,
            Granularity::PerBlock => sys::INT8ATTN_GRANULARITY_PER_BLOCK,
            Granularity::PerToken => sys::INT8ATTN_GRANULARITY_PER_TOKEN,
        }) as i32
    }
}

/// How [`Context::rotary`](crate::Context::rotary) evaluates a pair's rotation
/// (`int8attn_rotary_arithmetic_values`): the arithmetic of the framework code it stands in for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum RotaryArithmetic {
    /// Each product and each sum rounded to float32 on its own (diffusers' real-table
    /// `apply_rotary_emb`).
    #[default]
    Rounded,
    /// The complex product with one fused multiply-add per part:
    /// `y0 = fma(x0, c0, −(x1·s0))`, `y1 = fma(x0, s1, x1·c1)` (PyTorch's CUDA evaluation of
    /// `view_as_complex(x) * freqs_cis`).
    ComplexFma,
}

impl RotaryArithmetic {
    /// The C value.
    pub fn to_raw(self) -> i32 {
        (match self {
            RotaryArithmetic::Rounded => sys::INT8ATTN_ROTARY_ROUNDED,
            RotaryArithmetic::ComplexFma => sys::INT8ATTN_ROTARY_COMPLEX_FMA,
        }) as i32
    }
}

/// Numerical refinement flags (`int8attn_flag_values`); combine with `|`.
///
/// Without [`Flags::EXPLICIT`], the library adds `SMOOTH_K | SMOOTH_V` to whatever is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Flags(pub u32);

impl Flags {
    /// No flags (the library's defaults apply).
    pub const NONE: Flags = Flags(0);
    /// Subtract K's per-channel mean before quantizing K.
    pub const SMOOTH_K: Flags = Flags(sys::INT8ATTN_FLAG_SMOOTH_K);
    /// Subtract V's per-channel mean before quantizing V and add it back to O.
    pub const SMOOTH_V: Flags = Flags(sys::INT8ATTN_FLAG_SMOOTH_V);
    /// Channel balancing between Q and K.
    pub const BALANCE_CHANNELS: Flags = Flags(sys::INT8ATTN_FLAG_BALANCE_CHANNELS);
    /// Only the flags given explicitly apply.
    pub const EXPLICIT: Flags = Flags(sys::INT8ATTN_FLAG_EXPLICIT);

    /// `true` if every bit of `other` is set in `self`.
    pub fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl BitOr for Flags {
    type Output = Flags;
    fn bitor(self, rhs: Flags) -> Flags {
        Flags(self.0 | rhs.0)
    }
}

impl BitOrAssign for Flags {
    fn bitor_assign(&mut self, rhs: Flags) {
        self.0 |= rhs.0;
    }
}

/// What this build of the library contains (`int8attn_features()`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Features(pub u64);

impl Features {
    /// The CPU backend (always present).
    pub const CPU: u64 = sys::INT8ATTN_FEATURE_CPU as u64;
    /// The CUDA backend.
    pub const CUDA: u64 = sys::INT8ATTN_FEATURE_CUDA as u64;
    /// sm80/sm86 kernels.
    pub const SM80: u64 = sys::INT8ATTN_FEATURE_SM80 as u64;
    /// sm89 kernels.
    pub const SM89: u64 = sys::INT8ATTN_FEATURE_SM89 as u64;
    /// sm90a kernels.
    pub const SM90A: u64 = sys::INT8ATTN_FEATURE_SM90A as u64;
    /// Vector int8 dot products on the CPU.
    pub const CPU_SIMD: u64 = sys::INT8ATTN_FEATURE_CPU_SIMD as u64;

    /// `true` if all bits of `bits` are set.
    pub fn has(self, bits: u64) -> bool {
        self.0 & bits == bits
    }
    /// The CPU backend is present.
    pub fn cpu(self) -> bool {
        self.has(Self::CPU)
    }
    /// The CUDA backend is compiled in.
    pub fn cuda(self) -> bool {
        self.has(Self::CUDA)
    }
}
