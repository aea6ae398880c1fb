using System;

namespace Int8Attn
{
    /// <summary>Status codes (int8attn_status_t). Values are stable and only ever appended.</summary>
    public enum Status
    {
        /// <summary>Produced by these bindings when the loaded library's ABI differs.</summary>
        AbiMismatch = -1,
        /// <summary>Success.</summary>
        Ok = 0,
        /// <summary>An argument is invalid (generic).</summary>
        InvalidArgument = 100,
        /// <summary>A required pointer is NULL.</summary>
        NullPointer = 101,
        /// <summary>Wrong rank, mismatched or non-positive sizes.</summary>
        BadShape = 102,
        /// <summary>Negative, overlapping or unsupported strides.</summary>
        BadStride = 103,
        /// <summary>Unknown dtype, or dtypes that do not match.</summary>
        BadDtype = 104,
        /// <summary>A data pointer is not aligned to its element.</summary>
        Misaligned = 105,
        /// <summary>struct_size smaller than the first version.</summary>
        BadStructSize = 106,
        /// <summary>An output overlaps an input.</summary>
        Aliasing = 107,
        /// <summary>Unknown device, or tensors on different devices.</summary>
        BadDevice = 108,
        /// <summary>A size or byte count overflows.</summary>
        SizeOverflow = 109,
        /// <summary>A K/V cache would grow past its capacity.</summary>
        CapacityExceeded = 110,
        /// <summary>The caller's workspace is too small, or the context's would have to grow
        /// while the call's stream captures a CUDA graph.</summary>
        WorkspaceTooSmall = 111,
        /// <summary>A scalar parameter is out of range.</summary>
        BadValue = 112,
        /// <summary>Not a live handle of the expected kind (destroyed, or another kind of handle).</summary>
        InvalidHandle = 113,
        /// <summary>Valid but not supported (generic).</summary>
        NotSupported = 200,
        /// <summary>The GPU architecture has no kernel in this build.</summary>
        UnsupportedArch = 201,
        /// <summary>Head dim not a multiple of 8 in [8, 256].</summary>
        UnsupportedHeadDim = 202,
        /// <summary>Unknown precision mode, or not available here.</summary>
        UnsupportedMode = 203,
        /// <summary>E.g. CUDA tensors but the build has no CUDA.</summary>
        BackendUnavailable = 204,
        /// <summary>A CUDA runtime/driver call failed.</summary>
        Device = 300,
        /// <summary>Host or device allocation failed.</summary>
        OutOfMemory = 301,
        /// <summary>A bug in int8attn.</summary>
        Internal = 900,
    }

    /// <summary>Precision modes.</summary>
    public enum Mode
    {
        /// <summary>The policy's mode for the timestep, else Balanced.</summary>
        Default = 0,
        /// <summary>fp16/bf16 (fp32 on CPU) flash attention, no quantization.</summary>
        Exact = 1,
        /// <summary>INT8 Q·Kᵀ, P·V in fp16 with fp32 accumulation.</summary>
        Balanced = 2,
        /// <summary>INT8 Q·Kᵀ, P and V in FP8 E4M3.</summary>
        Fast = 3,
    }

    /// <summary>Element types.</summary>
    public enum DType
    {
        /// <summary>IEEE binary16 (host buffers: ushort bit patterns).</summary>
        F16 = 1,
        /// <summary>bfloat16 (host buffers: ushort bit patterns).</summary>
        BF16 = 2,
        /// <summary>IEEE binary32.</summary>
        F32 = 3,
        /// <summary>int8.</summary>
        I8 = 4,
        /// <summary>int32.</summary>
        I32 = 5,
        /// <summary>uint8.</summary>
        U8 = 6,
        /// <summary>FP8 E4M3.</summary>
        Fp8E4M3 = 7,
    }

    /// <summary>Device types (DLPack numbering).</summary>
    public enum DeviceType
    {
        /// <summary>Host memory.</summary>
        Cpu = 1,
        /// <summary>CUDA device memory.</summary>
        Cuda = 2,
    }

    /// <summary>Quantization scale granularity.</summary>
    public enum Granularity
    {
        /// <summary>Per token, for Q and for K.</summary>
        Default = 0,
        /// <summary>One scale per <see cref="Constants.QuantBlock"/> tokens.</summary>
        PerBlock = 1,
        /// <summary>One scale per token.</summary>
        PerToken = 2,
    }

    /// <summary>How <see cref="Context.Rotary(TensorDescriptor, TensorDescriptor, TensorDescriptor, TensorDescriptor, IntPtr, RotaryArithmetic)"/>
    /// evaluates a pair's rotation: the arithmetic of the framework code it stands in for.</summary>
    public enum RotaryArithmetic
    {
        /// <summary>Each product and each sum rounded to float32 on its own (diffusers' real-table apply_rotary_emb).</summary>
        Rounded = 0,
        /// <summary>The complex product with one fused multiply-add per part: y0 = fma(x0, c0, −(x1·s0)),
        /// y1 = fma(x0, s1, x1·c1) (PyTorch's CUDA evaluation of view_as_complex(x) * freqs_cis).</summary>
        ComplexFma = 1,
    }

    /// <summary>Numerical refinement flags.</summary>
    [Flags]
    public enum AttentionFlags : uint
    {
        /// <summary>No flags (SMOOTH_K | SMOOTH_V are added by the library).</summary>
        None = 0,
        /// <summary>Subtract K's per-channel mean before quantizing.</summary>
        SmoothK = 1u << 0,
        /// <summary>Subtract V's per-channel mean and add it back to O.</summary>
        SmoothV = 1u << 1,
        /// <summary>Channel balancing between Q and K.</summary>
        BalanceChannels = 1u << 2,
        /// <summary>Only the flags given explicitly apply.</summary>
        Explicit = 1u << 30,
    }

    /// <summary>Feature bits of the loaded library.</summary>
    [Flags]
    public enum Features : ulong
    {
        /// <summary>None.</summary>
        None = 0,
        /// <summary>The CPU backend.</summary>
        Cpu = 1ul << 0,
        /// <summary>The CUDA backend.</summary>
        Cuda = 1ul << 1,
        /// <summary>sm80/sm86 kernels.</summary>
        Sm80 = 1ul << 2,
        /// <summary>sm89 kernels.</summary>
        Sm89 = 1ul << 3,
        /// <summary>sm90a kernels.</summary>
        Sm90a = 1ul << 4,
        /// <summary>Vector int8 dot products on the CPU.</summary>
        CpuSimd = 1ul << 5,
    }

    /// <summary>An error reported by int8attn: the status and the library's message.</summary>
    public class Int8AttnException : Exception
    {
        /// <summary>The status code.</summary>
        public Status Status { get; private set; }
        /// <summary>The library's message (int8attn_last_error) on the failing thread.</summary>
        public string NativeMessage { get; private set; }

        /// <summary>Create an exception.</summary>
        public Int8AttnException(Status status, string message)
            : base(Format(status, message))
        {
            Status = status;
            NativeMessage = message ?? "";
        }

        static string Format(Status status, string message)
        {
            string name = Enum.IsDefined(typeof(Status), status) ? status.ToString() : "status";
            string s = "int8attn: " + name + " (" + (int)status + ")";
            return string.IsNullOrEmpty(message) ? s : s + ": " + message;
        }
    }
}
