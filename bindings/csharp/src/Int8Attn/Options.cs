using System;

namespace Int8Attn
{
    /// <summary>Options of <see cref="Context"/> creation (int8attn_context_params_t).</summary>
    public sealed class ContextOptions
    {
        /// <summary>CUDA device this context serves (default 0).</summary>
        public int DeviceId { get; set; }
        /// <summary>CPU worker threads; 0 = all hardware threads.</summary>
        public int NumThreads { get; set; }
        /// <summary>Device workspace to allocate up front (0 = on first use).</summary>
        public ulong WorkspaceBytes { get; set; }
    }

    /// <summary>
    /// Options of attention calls (int8attn_forward_params_t). Defaults come from
    /// int8attn_forward_params_init. Host (array) and descriptor (device pointer) forms exist for
    /// the optional tensors; set at most one of each pair.
    /// </summary>
    public sealed class ForwardOptions
    {
        /// <summary>Precision mode (default: the policy's, else Balanced).</summary>
        public Mode Mode { get; set; }
        /// <summary>Softmax scale; 0 = 1/sqrt(D).</summary>
        public float SmScale { get; set; }
        /// <summary>Causal mask (bottom-right aligned).</summary>
        public bool Causal { get; set; }
        /// <summary>Scale granularity of Q.</summary>
        public Granularity QGranularity { get; set; }
        /// <summary>Scale granularity of K.</summary>
        public Granularity KGranularity { get; set; }
        /// <summary>Refinement flags.</summary>
        public AttentionFlags Flags { get; set; }
        /// <summary>Multiplier in (0, 1] of the INT8 scales.</summary>
        public float ScaleMultiplier { get; set; }
        /// <summary>Timestep policy (not owned) and the step index.</summary>
        public Policy Policy { get; set; }
        /// <summary>Step index for <see cref="Policy"/>.</summary>
        public int Timestep { get; set; }
        /// <summary>Host valid key lengths, one per batch (CPU tensors).</summary>
        public int[] KLengths { get; set; }
        /// <summary>Valid key lengths as a descriptor (int32 [B] on the queries' device).</summary>
        public TensorDescriptor? KLengthsTensor { get; set; }
        /// <summary>Host block mask (uint8, 0 = skip) with <see cref="BlockMaskLayout"/>.</summary>
        public byte[] BlockMask { get; set; }
        /// <summary>Layout of <see cref="BlockMask"/>: [B|1, Hq|1, ⌈Nq/q_block⌉, ⌈Nk/k_block⌉].</summary>
        public TensorLayout BlockMaskLayout { get; set; }
        /// <summary>Block mask as a descriptor.</summary>
        public TensorDescriptor? BlockMaskTensor { get; set; }
        /// <summary>Query rows per mask block (default <see cref="Constants.MaskQBlockDefault"/>).</summary>
        public int MaskQBlock { get; set; }
        /// <summary>Keys per mask block (default <see cref="Constants.MaskKBlockDefault"/>).</summary>
        public int MaskKBlock { get; set; }
        /// <summary>Host output for the log-sum-exp, float32 [B, Hq, Nq] contiguous (written).</summary>
        public float[] Lse { get; set; }
        /// <summary>LSE output as a descriptor (written).</summary>
        public TensorDescriptor? LseTensor { get; set; }
        /// <summary>Caller workspace on the tensors' device (IntPtr.Zero = the context's own).</summary>
        public IntPtr Workspace { get; set; }
        /// <summary>Size of <see cref="Workspace"/>.</summary>
        public ulong WorkspaceBytes { get; set; }
        /// <summary>cudaStream_t for GPU tensors (IntPtr.Zero = default stream).</summary>
        public IntPtr Stream { get; set; }

        /// <summary>The library's defaults.</summary>
        public unsafe ForwardOptions()
        {
            NativeLibraryLoader.EnsureLoaded();
            ForwardParamsNative p;
            NativeMethods.int8attn_forward_params_init(&p);
            Mode = (Mode)p.Mode;
            SmScale = p.SmScale;
            Causal = p.Causal != 0;
            QGranularity = (Granularity)p.QGranularity;
            KGranularity = (Granularity)p.KGranularity;
            Flags = (AttentionFlags)p.Flags;
            ScaleMultiplier = p.ScaleMultiplier;
            MaskQBlock = p.MaskQBlock;
            MaskKBlock = p.MaskKBlock;
            Timestep = p.Timestep;
        }

        internal unsafe void Fill(ForwardParamsNative* p)
        {
            NativeMethods.int8attn_forward_params_init(p);
            p->Mode = (int)Mode;
            p->SmScale = SmScale;
            p->Causal = Causal ? 1 : 0;
            p->QGranularity = (int)QGranularity;
            p->KGranularity = (int)KGranularity;
            p->Flags = (uint)Flags;
            p->ScaleMultiplier = ScaleMultiplier;
            p->MaskQBlock = MaskQBlock;
            p->MaskKBlock = MaskKBlock;
            p->Timestep = Timestep;
            p->Workspace = Workspace;
            p->WorkspaceBytes = WorkspaceBytes;
            p->Stream = Stream;
        }
    }

    /// <summary>Options of <see cref="Context.Quantize(ReadOnlySpan{float}, TensorLayout, Span{sbyte}, Span{float}, Span{float}, QuantizeOptions)"/>.</summary>
    public sealed class QuantizeOptions
    {
        /// <summary>PerBlock (<see cref="Constants.QuantBlock"/> tokens, default) or PerToken.</summary>
        public Granularity Granularity { get; set; }
        /// <summary>Subtract the per-channel mean first (then a mean output is required).</summary>
        public bool Smooth { get; set; }
        /// <summary>In (0, 1]; default 1.</summary>
        public float ScaleMultiplier { get; set; }
        /// <summary>cudaStream_t for GPU tensors.</summary>
        public IntPtr Stream { get; set; }

        /// <summary>The library's defaults.</summary>
        public unsafe QuantizeOptions()
        {
            NativeLibraryLoader.EnsureLoaded();
            QuantizeParamsNative p;
            NativeMethods.int8attn_quantize_params_init(&p);
            Granularity = (Granularity)p.Granularity;
            Smooth = p.Smooth != 0;
            ScaleMultiplier = p.ScaleMultiplier;
        }

        internal unsafe void Fill(QuantizeParamsNative* p)
        {
            NativeMethods.int8attn_quantize_params_init(p);
            p->Granularity = (int)Granularity;
            p->Smooth = Smooth ? 1 : 0;
            p->ScaleMultiplier = ScaleMultiplier;
            p->Stream = Stream;
        }
    }

    /// <summary>Options of block-mask prediction (int8attn_mask_params_t).</summary>
    public sealed class MaskOptions
    {
        /// <summary>Query rows per block (default <see cref="Constants.MaskQBlockDefault"/>).</summary>
        public int QBlock { get; set; }
        /// <summary>Keys per block (default <see cref="Constants.MaskKBlockDefault"/>).</summary>
        public int KBlock { get; set; }
        /// <summary>If in (0, 1]: keep the top ⌈ratio·nkb⌉ key blocks (default 0 = threshold).</summary>
        public float KeepRatio { get; set; }
        /// <summary>Pooled softmax mass to keep (default 0.95).</summary>
        public float Threshold { get; set; }
        /// <summary>Never keep blocks entirely above the causal diagonal.</summary>
        public bool Causal { get; set; }
        /// <summary>0 = 1/sqrt(D).</summary>
        public float SmScale { get; set; }
        /// <summary>cudaStream_t for GPU tensors.</summary>
        public IntPtr Stream { get; set; }

        /// <summary>The library's defaults.</summary>
        public unsafe MaskOptions()
        {
            NativeLibraryLoader.EnsureLoaded();
            MaskParamsNative p;
            NativeMethods.int8attn_mask_params_init(&p);
            QBlock = p.QBlock; KBlock = p.KBlock; KeepRatio = p.KeepRatio; Threshold = p.Threshold;
            Causal = p.Causal != 0; SmScale = p.SmScale;
        }

        internal unsafe void Fill(MaskParamsNative* p)
        {
            NativeMethods.int8attn_mask_params_init(p);
            p->QBlock = QBlock; p->KBlock = KBlock; p->KeepRatio = KeepRatio; p->Threshold = Threshold;
            p->Causal = Causal ? 1 : 0; p->SmScale = SmScale; p->Stream = Stream;
        }
    }

    /// <summary>Options of a <see cref="Policy"/> (int8attn_policy_params_t); arrays are copied.</summary>
    public sealed class PolicyOptions
    {
        /// <summary>Number of sampler steps T, or 0 when <see cref="Sigmas"/> is given.</summary>
        public int NumTimesteps { get; set; }
        /// <summary>Optional noise schedule, one sigma per step.</summary>
        public float[] Sigmas { get; set; }
        /// <summary>Mode of ordinary steps (default Fast).</summary>
        public Mode DefaultMode { get; set; }
        /// <summary>Mode of the protected first/last steps (default Exact).</summary>
        public Mode EdgeMode { get; set; }
        /// <summary>First steps in EdgeMode (default 1).</summary>
        public int NumFirstEdge { get; set; }
        /// <summary>Last steps in EdgeMode (default 1).</summary>
        public int NumLastEdge { get; set; }
        /// <summary>With sigmas: steps with sigma ≥ this use EdgeMode (default +inf).</summary>
        public float SigmaEdgeAbove { get; set; }
        /// <summary>With sigmas: steps with sigma ≤ this use EdgeMode (default 0).</summary>
        public float SigmaEdgeBelow { get; set; }
        /// <summary>Optional per-step multipliers in (0, 1] (length T).</summary>
        public float[] ScaleMultipliers { get; set; }

        /// <summary>The library's defaults.</summary>
        public unsafe PolicyOptions()
        {
            NativeLibraryLoader.EnsureLoaded();
            PolicyParamsNative p;
            NativeMethods.int8attn_policy_params_init(&p);
            NumTimesteps = p.NumTimesteps; DefaultMode = (Mode)p.DefaultMode; EdgeMode = (Mode)p.EdgeMode;
            NumFirstEdge = p.NumFirstEdge; NumLastEdge = p.NumLastEdge;
            SigmaEdgeAbove = p.SigmaEdgeAbove; SigmaEdgeBelow = p.SigmaEdgeBelow;
        }
    }

    /// <summary>Options of a <see cref="KvCache"/> (int8attn_kv_cache_params_t).</summary>
    public sealed class KvCacheOptions
    {
        /// <summary>Where the cache lives (default: CUDA if built and present, else CPU).</summary>
        public DeviceType DeviceType { get; set; }
        /// <summary>B (≥ 1).</summary>
        public long Batch { get; set; }
        /// <summary>Hkv (≥ 1).</summary>
        public long NumKvHeads { get; set; }
        /// <summary>Maximum tokens per sequence.</summary>
        public long Capacity { get; set; }
        /// <summary>D.</summary>
        public long HeadDim { get; set; }
        /// <summary>Balanced (int8 K, fp16 V, default) or Fast (int8 K, FP8 V).</summary>
        public Mode Mode { get; set; }
        /// <summary>SmoothK / SmoothV (default both).</summary>
        public AttentionFlags Flags { get; set; }
        /// <summary>Stream for the initial device allocation.</summary>
        public IntPtr Stream { get; set; }

        /// <summary>A cache of batch × heads × capacity tokens of headDim channels, library defaults otherwise.</summary>
        public unsafe KvCacheOptions(long batch, long numKvHeads, long capacity, long headDim)
        {
            NativeLibraryLoader.EnsureLoaded();
            KvCacheParamsNative p;
            NativeMethods.int8attn_kv_cache_params_init(&p);
            DeviceType = (DeviceType)p.DeviceType; Mode = (Mode)p.Mode; Flags = (AttentionFlags)p.Flags;
            Batch = batch; NumKvHeads = numKvHeads; Capacity = capacity; HeadDim = headDim;
        }
    }
}
