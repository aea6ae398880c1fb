// Blittable mirrors of the structs in include/int8attn.h and the P/Invoke declarations.
// Field order, types and sizes follow the header exactly; tests/Int8Attn.Tests checks
// Marshal.SizeOf / Marshal.OffsetOf against the same baseline as tests/test_abi_layout.cpp.
using System;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;

namespace Int8Attn
{
    /// <summary>
    /// The numeric macros of include/int8attn.h (rules the C core enforces), copied here because
    /// P/Invoke cannot read a header; the test program checks each against the header.
    /// </summary>
    public static class Constants
    {
        /// <summary>Largest rank of a tensor descriptor (INT8ATTN_MAX_RANK).</summary>
        public const int MaxRank = 6;
        /// <summary>Tokens per scale with <see cref="Granularity.PerBlock"/> (INT8ATTN_QUANT_BLOCK):
        /// a head of N tokens has ⌈N / QuantBlock⌉ scales.</summary>
        public const int QuantBlock = 64;
        /// <summary>Default query rows per block-mask block (INT8ATTN_MASK_Q_BLOCK_DEFAULT).</summary>
        public const int MaskQBlockDefault = 128;
        /// <summary>Default keys per block-mask block (INT8ATTN_MASK_K_BLOCK_DEFAULT).</summary>
        public const int MaskKBlockDefault = 64;
        /// <summary>Largest head dim (INT8ATTN_MAX_HEAD_DIM); head dims are multiples of 8 in
        /// [8, MaxHeadDim].</summary>
        public const int MaxHeadDim = 256;
    }

    /// <summary>int8attn_tensor_t: a strided view of caller-owned memory (DLPack semantics).</summary>
    [StructLayout(LayoutKind.Sequential)]
    public unsafe struct TensorDescriptor
    {
        /// <summary>Largest rank (INT8ATTN_MAX_RANK); the same as <see cref="Constants.MaxRank"/>.</summary>
        public const int MaxRank = Constants.MaxRank;

        /// <summary>First element; caller-owned (host or device memory).</summary>
        public IntPtr Data;
        /// <summary><see cref="Int8Attn.DeviceType"/> value.</summary>
        public int DeviceType;
        /// <summary>CUDA device index; 0 for the CPU.</summary>
        public int DeviceId;
        /// <summary><see cref="Int8Attn.DType"/> value.</summary>
        public int DType;
        /// <summary>Number of dimensions, 1..<see cref="MaxRank"/>.</summary>
        public int Rank;
        /// <summary>Size of each dimension.</summary>
        public fixed long Shape[MaxRank];
        /// <summary>Stride of each dimension, in elements.</summary>
        public fixed long Strides[MaxRank];

        /// <summary>
        /// Describe memory at <paramref name="data"/> (device memory, or pinned host memory).
        /// <paramref name="strides"/> null means row-major. The memory must stay valid (and, for
        /// host memory, pinned) for as long as the library uses it.
        /// </summary>
        public static TensorDescriptor Create(IntPtr data, DeviceType device, int deviceId, DType dtype,
                                              long[] shape, long[] strides = null)
        {
            if (shape == null) throw new ArgumentNullException("shape");
            if (shape.Length < 1 || shape.Length > MaxRank)
                throw new Int8AttnException(Status.BadShape, "tensor rank is " + shape.Length + "; it must be in [1, " + MaxRank + "]");
            if (strides == null) strides = TensorLayout.ContiguousStrides(shape);
            if (strides.Length != shape.Length)
                throw new Int8AttnException(Status.BadStride, strides.Length + " strides given for a tensor of rank " + shape.Length);
            var t = new TensorDescriptor();
            t.Data = data;
            t.DeviceType = (int)device;
            t.DeviceId = deviceId;
            t.DType = (int)dtype;
            t.Rank = shape.Length;
            for (int i = 0; i < shape.Length; i++) { t.Shape[i] = shape[i]; t.Strides[i] = strides[i]; }
            return t;
        }

        /// <summary>Describe device memory (CUDA) with a layout.</summary>
        public static TensorDescriptor Create(IntPtr data, DeviceType device, int deviceId, TensorLayout layout)
        {
            return Create(data, device, deviceId, layout.DType, layout.Shape, layout.Strides);
        }
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct ContextParamsNative
    {
        public uint StructSize;
        public int DeviceId;
        public int NumThreads;
        public int Reserved0;
        public ulong WorkspaceBytes;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct PolicyParamsNative
    {
        public uint StructSize;
        public int NumTimesteps;
        public IntPtr Sigmas;           // const float*
        public int NumSigmas;
        public int DefaultMode;
        public int EdgeMode;
        public int NumFirstEdge;
        public int NumLastEdge;
        public float SigmaEdgeAbove;
        public float SigmaEdgeBelow;
        public IntPtr ScaleMultipliers; // const float*
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct ForwardParamsNative
    {
        public uint StructSize;
        public int Mode;
        public float SmScale;
        public int Causal;
        public int QGranularity;
        public int KGranularity;
        public uint Flags;
        public float ScaleMultiplier;
        public IntPtr KLengths;   // const int8attn_tensor_t*
        public IntPtr BlockMask;  // const int8attn_tensor_t*
        public int MaskQBlock;
        public int MaskKBlock;
        public IntPtr Lse;        // const int8attn_tensor_t*
        public IntPtr Policy;     // const int8attn_policy_t*
        public int Timestep;
        public int Reserved0;
        public IntPtr Workspace;
        public ulong WorkspaceBytes;
        public IntPtr Stream;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct QuantizeParamsNative
    {
        public uint StructSize;
        public int Granularity;
        public int Smooth;
        public float ScaleMultiplier;
        public IntPtr Stream;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct KvCacheParamsNative
    {
        public uint StructSize;
        public int DeviceType;
        public long Batch;
        public long NumKvHeads;
        public long Capacity;
        public long HeadDim;
        public int Mode;
        public uint Flags;
        public IntPtr Stream;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct MaskParamsNative
    {
        public uint StructSize;
        public int QBlock;
        public int KBlock;
        public float KeepRatio;
        public float Threshold;
        public int Causal;
        public float SmScale;
        public IntPtr Stream;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct RotaryParamsNative
    {
        public uint StructSize;
        public int Arithmetic;
        public IntPtr Stream;
    }

    [StructLayout(LayoutKind.Sequential)]
    internal struct RmsNormParamsNative
    {
        public uint StructSize;
        public float Eps;
        public IntPtr Stream;
    }

    /// <summary>
    /// The C functions. Every entry point of the public API calls
    /// <see cref="NativeLibraryLoader.EnsureLoaded"/> before using these.
    /// <para>The [DllImport] declarations live in the nested <c>Imports</c> class and are reached only
    /// through these non-inlined forwarders. Reason: Mono binds a P/Invoke to its library when it
    /// JIT-compiles the calling method, and remembers a failure; a public method that first calls
    /// EnsureLoaded (which may preload INT8ATTN_LIBRARY) and then a P/Invoke directly would bind
    /// too early. The forwarders are compiled on first call, after EnsureLoaded has run.</para>
    /// </summary>
    internal static unsafe class NativeMethods
    {
        internal const string Lib = NativeLibraryLoader.LibraryName;

        internal static class Imports
        {
            [DllImport(Lib)] internal static extern IntPtr int8attn_status_string(int status);
            [DllImport(Lib)] internal static extern IntPtr int8attn_last_error();
            [DllImport(Lib)] internal static extern uint int8attn_version_number();
            [DllImport(Lib)] internal static extern IntPtr int8attn_version_string();
            [DllImport(Lib)] internal static extern uint int8attn_abi_version();
            [DllImport(Lib)] internal static extern ulong int8attn_features();
            [DllImport(Lib)] internal static extern int int8attn_device_count(out int count);
            [DllImport(Lib)] internal static extern int int8attn_device_describe(byte* buffer, UIntPtr bufferSize, int deviceId);
            [DllImport(Lib)] internal static extern int int8attn_tensor_init_contiguous(TensorDescriptor* tensor, IntPtr data, int deviceType, int deviceId, int dtype, int rank, long* shape);
            [DllImport(Lib)] internal static extern void int8attn_context_params_init(ContextParamsNative* p);
            [DllImport(Lib)] internal static extern int int8attn_context_create(out ContextHandle context, ContextParamsNative* p);
            [DllImport(Lib)] internal static extern void int8attn_context_destroy(IntPtr context);
            [DllImport(Lib)] internal static extern int int8attn_context_reserve_workspace(ContextHandle context, int deviceType, ulong bytes);
            [DllImport(Lib)] internal static extern int int8attn_synchronize(ContextHandle context, IntPtr stream);
            [DllImport(Lib)] internal static extern void int8attn_policy_params_init(PolicyParamsNative* p);
            [DllImport(Lib)] internal static extern int int8attn_policy_create(out PolicyHandle policy, PolicyParamsNative* p);
            [DllImport(Lib)] internal static extern void int8attn_policy_destroy(IntPtr policy);
            [DllImport(Lib)] internal static extern int int8attn_policy_set_mode(PolicyHandle policy, int timestep, int mode);
            [DllImport(Lib)] internal static extern int int8attn_policy_get(int* mode, float* scaleMultiplier, PolicyHandle policy, int timestep);
            [DllImport(Lib)] internal static extern int int8attn_policy_num_timesteps(out int numTimesteps, PolicyHandle policy);
            [DllImport(Lib)] internal static extern void int8attn_forward_params_init(ForwardParamsNative* p);
            [DllImport(Lib)] internal static extern int int8attn_forward(ContextHandle context, TensorDescriptor* q, TensorDescriptor* k, TensorDescriptor* v, TensorDescriptor* o, ForwardParamsNative* p);
            [DllImport(Lib)] internal static extern int int8attn_forward_workspace_size(out ulong bytes, ContextHandle context, TensorDescriptor* q, TensorDescriptor* k, TensorDescriptor* v, ForwardParamsNative* p);
            [DllImport(Lib)] internal static extern void int8attn_quantize_params_init(QuantizeParamsNative* p);
            [DllImport(Lib)] internal static extern int int8attn_quantize(ContextHandle context, TensorDescriptor* x, TensorDescriptor* xInt8, TensorDescriptor* scales, TensorDescriptor* mean, QuantizeParamsNative* p);
            [DllImport(Lib)] internal static extern void int8attn_rotary_params_init(RotaryParamsNative* p);
            [DllImport(Lib)] internal static extern int int8attn_rotary(ContextHandle context, TensorDescriptor* x, TensorDescriptor* cos, TensorDescriptor* sin, TensorDescriptor* output, RotaryParamsNative* p);
            [DllImport(Lib)] internal static extern void int8attn_rms_norm_params_init(RmsNormParamsNative* p);
            [DllImport(Lib)] internal static extern int int8attn_rms_norm(ContextHandle context, TensorDescriptor* x, TensorDescriptor* weight, TensorDescriptor* output, RmsNormParamsNative* p);
            [DllImport(Lib)] internal static extern void int8attn_kv_cache_params_init(KvCacheParamsNative* p);
            [DllImport(Lib)] internal static extern int int8attn_kv_cache_create(out KvCacheHandle cache, ContextHandle context, KvCacheParamsNative* p);
            [DllImport(Lib)] internal static extern void int8attn_kv_cache_destroy(IntPtr cache);
            [DllImport(Lib)] internal static extern int int8attn_kv_cache_reset(KvCacheHandle cache);
            [DllImport(Lib)] internal static extern int int8attn_kv_cache_length(out long length, KvCacheHandle cache);
            [DllImport(Lib)] internal static extern int int8attn_kv_cache_append(KvCacheHandle cache, TensorDescriptor* k, TensorDescriptor* v, IntPtr stream);
            [DllImport(Lib)] internal static extern int int8attn_kv_cache_forward(ContextHandle context, TensorDescriptor* q, KvCacheHandle cache, TensorDescriptor* o, ForwardParamsNative* p);
            [DllImport(Lib)] internal static extern void int8attn_mask_params_init(MaskParamsNative* p);
            [DllImport(Lib)] internal static extern int int8attn_predict_block_mask(ContextHandle context, TensorDescriptor* q, TensorDescriptor* k, TensorDescriptor* mask, MaskParamsNative* p);
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static IntPtr int8attn_status_string(int status) { return Imports.int8attn_status_string(status); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static IntPtr int8attn_last_error() { return Imports.int8attn_last_error(); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static uint int8attn_version_number() { return Imports.int8attn_version_number(); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static IntPtr int8attn_version_string() { return Imports.int8attn_version_string(); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static uint int8attn_abi_version() { return Imports.int8attn_abi_version(); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static ulong int8attn_features() { return Imports.int8attn_features(); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static int int8attn_device_count(out int count) { return Imports.int8attn_device_count(out count); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static int int8attn_device_describe(byte* buffer, UIntPtr bufferSize, int deviceId) { return Imports.int8attn_device_describe(buffer, bufferSize, deviceId); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static int int8attn_tensor_init_contiguous(TensorDescriptor* tensor, IntPtr data, int deviceType, int deviceId, int dtype, int rank, long* shape) { return Imports.int8attn_tensor_init_contiguous(tensor, data, deviceType, deviceId, dtype, rank, shape); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static void int8attn_context_params_init(ContextParamsNative* p) { Imports.int8attn_context_params_init(p); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static int int8attn_context_create(out ContextHandle context, ContextParamsNative* p) { return Imports.int8attn_context_create(out context, p); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static void int8attn_context_destroy(IntPtr context) { Imports.int8attn_context_destroy(context); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static int int8attn_context_reserve_workspace(ContextHandle context, int deviceType, ulong bytes) { return Imports.int8attn_context_reserve_workspace(context, deviceType, bytes); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static int int8attn_synchronize(ContextHandle context, IntPtr stream) { return Imports.int8attn_synchronize(context, stream); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static void int8attn_policy_params_init(PolicyParamsNative* p) { Imports.int8attn_policy_params_init(p); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static int int8attn_policy_create(out PolicyHandle policy, PolicyParamsNative* p) { return Imports.int8attn_policy_create(out policy, p); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static void int8attn_policy_destroy(IntPtr policy) { Imports.int8attn_policy_destroy(policy); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static int int8attn_policy_set_mode(PolicyHandle policy, int timestep, int mode) { return Imports.int8attn_policy_set_mode(policy, timestep, mode); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static int int8attn_policy_get(int* mode, float* scaleMultiplier, PolicyHandle policy, int timestep) { return Imports.int8attn_policy_get(mode, scaleMultiplier, policy, timestep); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static int int8attn_policy_num_timesteps(out int numTimesteps, PolicyHandle policy) { return Imports.int8attn_policy_num_timesteps(out numTimesteps, policy); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static void int8attn_forward_params_init(ForwardParamsNative* p) { Imports.int8attn_forward_params_init(p); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static int int8attn_forward(ContextHandle context, TensorDescriptor* q, TensorDescriptor* k, TensorDescriptor* v, TensorDescriptor* o, ForwardParamsNative* p) { return Imports.int8attn_forward(context, q, k, v, o, p); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static int int8attn_forward_workspace_size(out ulong bytes, ContextHandle context, TensorDescriptor* q, TensorDescriptor* k, TensorDescriptor* v, ForwardParamsNative* p) { return Imports.int8attn_forward_workspace_size(out bytes, context, q, k, v, p); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static void int8attn_quantize_params_init(QuantizeParamsNative* p) { Imports.int8attn_quantize_params_init(p); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static int int8attn_quantize(ContextHandle context, TensorDescriptor* x, TensorDescriptor* xInt8, TensorDescriptor* scales, TensorDescriptor* mean, QuantizeParamsNative* p) { return Imports.int8attn_quantize(context, x, xInt8, scales, mean, p); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static void int8attn_rotary_params_init(RotaryParamsNative* p) { Imports.int8attn_rotary_params_init(p); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static int int8attn_rotary(ContextHandle context, TensorDescriptor* x, TensorDescriptor* cos, TensorDescriptor* sin, TensorDescriptor* output, RotaryParamsNative* p) { return Imports.int8attn_rotary(context, x, cos, sin, output, p); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static void int8attn_rms_norm_params_init(RmsNormParamsNative* p) { Imports.int8attn_rms_norm_params_init(p); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static int int8attn_rms_norm(ContextHandle context, TensorDescriptor* x, TensorDescriptor* weight, TensorDescriptor* output, RmsNormParamsNative* p) { return Imports.int8attn_rms_norm(context, x, weight, output, p); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static void int8attn_kv_cache_params_init(KvCacheParamsNative* p) { Imports.int8attn_kv_cache_params_init(p); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static int int8attn_kv_cache_create(out KvCacheHandle cache, ContextHandle context, KvCacheParamsNative* p) { return Imports.int8attn_kv_cache_create(out cache, context, p); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static void int8attn_kv_cache_destroy(IntPtr cache) { Imports.int8attn_kv_cache_destroy(cache); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static int int8attn_kv_cache_reset(KvCacheHandle cache) { return Imports.int8attn_kv_cache_reset(cache); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static int int8attn_kv_cache_length(out long length, KvCacheHandle cache) { return Imports.int8attn_kv_cache_length(out length, cache); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static int int8attn_kv_cache_append(KvCacheHandle cache, TensorDescriptor* k, TensorDescriptor* v, IntPtr stream) { return Imports.int8attn_kv_cache_append(cache, k, v, stream); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static int int8attn_kv_cache_forward(ContextHandle context, TensorDescriptor* q, KvCacheHandle cache, TensorDescriptor* o, ForwardParamsNative* p) { return Imports.int8attn_kv_cache_forward(context, q, cache, o, p); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static void int8attn_mask_params_init(MaskParamsNative* p) { Imports.int8attn_mask_params_init(p); }

        [MethodImpl(MethodImplOptions.NoInlining)]
        internal static int int8attn_predict_block_mask(ContextHandle context, TensorDescriptor* q, TensorDescriptor* k, TensorDescriptor* mask, MaskParamsNative* p) { return Imports.int8attn_predict_block_mask(context, q, k, mask, p); }
    }
}
