using System;
using System.Runtime.InteropServices;
using System.Threading;

namespace Int8Attn
{
    /// <summary>
    /// A context (int8attn_context_t): device binding, workspace and CPU thread pool.
    /// <para>Thread safety (from the header): calls on one context must not run concurrently; use one
    /// context per thread. Different contexts are independent. Concurrent use of one Context is
    /// detected and throws <see cref="InvalidOperationException"/> rather than corrupting state.</para>
    /// <example><code>
    /// using (var ctx = new Context())
    /// {
    ///     var layout = TensorLayout.Contiguous(DType.F32, 1, 2, 70, 40);
    ///     ctx.Attention(q, layout, k, layout, v, layout, o, layout, new ForwardOptions { Mode = Mode.Balanced });
    /// }
    /// </code></example>
    /// </summary>
    public sealed class Context : IDisposable
    {
        readonly ContextHandle handle;
        int busy;

        /// <summary>A context with default options (checks the library's ABI first).</summary>
        public Context() : this(null) { }

        /// <summary>A context with explicit options (checks the library's ABI first).</summary>
        public unsafe Context(ContextOptions options)
        {
            NativeLibraryLoader.EnsureLoaded();
            ContextParamsNative p;
            NativeMethods.int8attn_context_params_init(&p);
            if (options != null)
            {
                p.DeviceId = options.DeviceId;
                p.NumThreads = options.NumThreads;
                p.WorkspaceBytes = options.WorkspaceBytes;
            }
            ContextHandle h;
            int st = NativeMethods.int8attn_context_create(out h, &p);
            if (st != 0) { if (h != null) h.Dispose(); Library.Check(st); }
            handle = h;
        }

        /// <summary>The native handle.</summary>
        public ContextHandle Handle { get { return handle; } }

        /// <summary>Destroy the context (waits for its GPU work).</summary>
        public void Dispose() { handle.Dispose(); }

        void Enter()
        {
            if (handle.IsClosed) throw new ObjectDisposedException("Context");
            if (Interlocked.CompareExchange(ref busy, 1, 0) != 0)
                throw new InvalidOperationException("int8attn: a Context must not be used by two threads at once; use one Context per thread");
        }

        void Exit() { Interlocked.Exchange(ref busy, 0); }

        // ---- attention -------------------------------------------------------------------------

        /// <summary>Attention on host fp32 buffers: O = softmax(sm_scale·Q·Kᵀ + mask)·V.
        /// Q/O are [B, Hq, Nq, D], K/V [B, Hkv, Nk, D] (logical order; strides in the layouts).</summary>
        public unsafe void Attention(ReadOnlySpan<float> q, TensorLayout qLayout, ReadOnlySpan<float> k, TensorLayout kLayout,
                                     ReadOnlySpan<float> v, TensorLayout vLayout, Span<float> o, TensorLayout oLayout,
                                     ForwardOptions options = null)
        {
            qLayout.CheckBuffer(q.Length, 4, "q"); kLayout.CheckBuffer(k.Length, 4, "k");
            vLayout.CheckBuffer(v.Length, 4, "v"); oLayout.CheckBuffer(o.Length, 4, "o");
            fixed (float* qp = &MemoryMarshal.GetReference(q))
            fixed (float* kp = &MemoryMarshal.GetReference(k))
            fixed (float* vp = &MemoryMarshal.GetReference(v))
            fixed (float* op = &MemoryMarshal.GetReference(o))
            {
                var qd = qLayout.Describe((IntPtr)qp); var kd = kLayout.Describe((IntPtr)kp);
                var vd = vLayout.Describe((IntPtr)vp); var od = oLayout.Describe((IntPtr)op);
                Forward(&qd, &kd, &vd, &od, null, options);
            }
        }

        /// <summary>Attention on host fp16 or bf16 buffers (ushort bit patterns; the layouts' dtype says which).</summary>
        public unsafe void Attention(ReadOnlySpan<ushort> q, TensorLayout qLayout, ReadOnlySpan<ushort> k, TensorLayout kLayout,
                                     ReadOnlySpan<ushort> v, TensorLayout vLayout, Span<ushort> o, TensorLayout oLayout,
                                     ForwardOptions options = null)
        {
            qLayout.CheckBuffer(q.Length, 2, "q"); kLayout.CheckBuffer(k.Length, 2, "k");
            vLayout.CheckBuffer(v.Length, 2, "v"); oLayout.CheckBuffer(o.Length, 2, "o");
            fixed (ushort* qp = &MemoryMarshal.GetReference(q))
            fixed (ushort* kp = &MemoryMarshal.GetReference(k))
            fixed (ushort* vp = &MemoryMarshal.GetReference(v))
            fixed (ushort* op = &MemoryMarshal.GetReference(o))
            {
                var qd = qLayout.Describe((IntPtr)qp); var kd = kLayout.Describe((IntPtr)kp);
                var vd = vLayout.Describe((IntPtr)vp); var od = oLayout.Describe((IntPtr)op);
                Forward(&qd, &kd, &vd, &od, null, options);
            }
        }

        /// <summary>Attention on descriptors (device pointers, or host memory the caller has pinned).
        /// GPU work is asynchronous on options.Stream.</summary>
        public unsafe void Attention(TensorDescriptor q, TensorDescriptor k, TensorDescriptor v, TensorDescriptor o,
                                     ForwardOptions options = null)
        {
            Forward(&q, &k, &v, &o, null, options);
        }

        /// <summary>Workspace bytes <see cref="Attention(TensorDescriptor, TensorDescriptor, TensorDescriptor, TensorDescriptor, ForwardOptions)"/> needs.</summary>
        public unsafe ulong AttentionWorkspaceSize(TensorDescriptor q, TensorDescriptor k, TensorDescriptor v, ForwardOptions options = null)
        {
            ulong bytes = 0;
            TensorDescriptor* qp = &q, kp = &k, vp = &v;
            Enter();
            try
            {
                WithParams(qp, options, delegate(ForwardParamsNative* p)
                {
                    Library.Check(NativeMethods.int8attn_forward_workspace_size(out bytes, handle, qp, kp, vp, p));
                });
            }
            finally { Exit(); }
            return bytes;
        }

        /// <summary>Attention of host fp32 queries against a K/V cache.</summary>
        public unsafe void Attention(ReadOnlySpan<float> q, TensorLayout qLayout, KvCache cache, Span<float> o, TensorLayout oLayout,
                                     ForwardOptions options = null)
        {
            qLayout.CheckBuffer(q.Length, 4, "q"); oLayout.CheckBuffer(o.Length, 4, "o");
            fixed (float* qp = &MemoryMarshal.GetReference(q))
            fixed (float* op = &MemoryMarshal.GetReference(o))
            {
                var qd = qLayout.Describe((IntPtr)qp); var od = oLayout.Describe((IntPtr)op);
                Forward(&qd, null, null, &od, cache, options);
            }
        }

        /// <summary>Attention of queries (descriptor) against a K/V cache.</summary>
        public unsafe void Attention(TensorDescriptor q, KvCache cache, TensorDescriptor o, ForwardOptions options = null)
        {
            Forward(&q, null, null, &o, cache, options);
        }

        unsafe delegate void ParamsAction(ForwardParamsNative* p);

        // Builds the native params (pinning host arrays, keeping the policy handle alive) and runs body.
        unsafe void WithParams(TensorDescriptor* q, ForwardOptions options, ParamsAction body)
        {
            ForwardParamsNative p;
            if (options == null) { NativeMethods.int8attn_forward_params_init(&p); body(&p); return; }
            options.Fill(&p);
            TensorDescriptor kl, bm, lse;
            int[] klArr = options.KLengths; byte[] bmArr = options.BlockMask; float[] lseArr = options.Lse;
            PolicyHandle ph = options.Policy != null ? options.Policy.Handle : null;
            bool policyRef = false;
            try
            {
                if (ph != null) { ph.DangerousAddRef(ref policyRef); p.Policy = ph.DangerousGetHandle(); }
                fixed (int* klp = klArr)
                fixed (byte* bmp = bmArr)
                fixed (float* lsep = lseArr)
                {
                    if (klArr != null)
                    {
                        kl = TensorDescriptor.Create((IntPtr)klp, DeviceType.Cpu, 0, DType.I32, new long[] { klArr.Length });
                        p.KLengths = (IntPtr)(&kl);
                    }
                    else if (options.KLengthsTensor.HasValue) { kl = options.KLengthsTensor.Value; p.KLengths = (IntPtr)(&kl); }

                    if (bmArr != null)
                    {
                        if (options.BlockMaskLayout == null)
                            throw new Int8AttnException(Status.NullPointer, "BlockMask is set but BlockMaskLayout is not");
                        options.BlockMaskLayout.CheckBuffer(bmArr.Length, 1, "block_mask");
                        bm = options.BlockMaskLayout.Describe((IntPtr)bmp);
                        p.BlockMask = (IntPtr)(&bm);
                    }
                    else if (options.BlockMaskTensor.HasValue) { bm = options.BlockMaskTensor.Value; p.BlockMask = (IntPtr)(&bm); }

                    if (lseArr != null)
                    {
                        var shape = new long[] { q->Shape[0], q->Shape[1], q->Shape[2] };
                        var layout = TensorLayout.Contiguous(DType.F32, shape);
                        layout.CheckBuffer(lseArr.Length, 4, "lse");
                        lse = layout.Describe((IntPtr)lsep);
                        p.Lse = (IntPtr)(&lse);
                    }
                    else if (options.LseTensor.HasValue) { lse = options.LseTensor.Value; p.Lse = (IntPtr)(&lse); }

                    body(&p);
                }
            }
            finally
            {
                if (policyRef) ph.DangerousRelease();
            }
        }

        unsafe void Forward(TensorDescriptor* q, TensorDescriptor* k, TensorDescriptor* v, TensorDescriptor* o,
                            KvCache cache, ForwardOptions options)
        {
            Enter();
            try
            {
                WithParams(q, options, delegate(ForwardParamsNative* p)
                {
                    if (cache == null)
                        Library.Check(NativeMethods.int8attn_forward(handle, q, k, v, o, p));
                    else
                        Library.Check(NativeMethods.int8attn_kv_cache_forward(handle, q, cache.Handle, o, p));
                });
            }
            finally { Exit(); }
        }

        // ---- quantize, masks, workspace ------------------------------------------------------

        /// <summary>Quantize host x [B, H, N, D] to int8 (contiguous, like x's shape), with float32
        /// scales [B, H, G] (G = ⌈N / <see cref="Constants.QuantBlock"/>⌉ per block, N per token)
        /// and, when options.Smooth, means [B, H, D] (pass an empty span otherwise).</summary>
        public unsafe void Quantize(ReadOnlySpan<float> x, TensorLayout xLayout, Span<sbyte> xInt8, Span<float> scales,
                                    Span<float> mean, QuantizeOptions options = null)
        {
            if (xLayout.Shape.Length != 4)
                throw new Int8AttnException(Status.BadShape, "x: rank is " + xLayout.Shape.Length + "; quantize takes [B, H, N, D]");
            xLayout.CheckBuffer(x.Length, 4, "x");
            if (options == null) options = new QuantizeOptions();
            long b = xLayout.Shape[0], h = xLayout.Shape[1], n = xLayout.Shape[2], d = xLayout.Shape[3];
            long g = options.Granularity == Granularity.PerToken ? n : (n + Constants.QuantBlock - 1) / Constants.QuantBlock;
            var qLayout = TensorLayout.Contiguous(DType.I8, b, h, n, d);
            var sLayout = TensorLayout.Contiguous(DType.F32, b, h, g);
            var mLayout = TensorLayout.Contiguous(DType.F32, b, h, d);
            qLayout.CheckBuffer(xInt8.Length, 1, "x_int8");
            sLayout.CheckBuffer(scales.Length, 4, "scales");
            if (!mean.IsEmpty) mLayout.CheckBuffer(mean.Length, 4, "mean");
            fixed (float* xp = &MemoryMarshal.GetReference(x))
            fixed (sbyte* qp = &MemoryMarshal.GetReference(xInt8))
            fixed (float* sp = &MemoryMarshal.GetReference(scales))
            fixed (float* mp = &MemoryMarshal.GetReference(mean))
            {
                var xd = xLayout.Describe((IntPtr)xp); var qd = qLayout.Describe((IntPtr)qp);
                var sd = sLayout.Describe((IntPtr)sp); var md = mLayout.Describe((IntPtr)mp);
                QuantizeCore(&xd, &qd, &sd, mean.IsEmpty ? null : &md, options);
            }
        }

        /// <summary>Quantize with descriptors; <paramref name="mean"/> null when not smoothing.</summary>
        public unsafe void Quantize(TensorDescriptor x, TensorDescriptor xInt8, TensorDescriptor scales, TensorDescriptor? mean,
                                    QuantizeOptions options = null)
        {
            TensorDescriptor m = mean.HasValue ? mean.Value : default(TensorDescriptor);
            QuantizeCore(&x, &xInt8, &scales, mean.HasValue ? &m : null, options ?? new QuantizeOptions());
        }

        unsafe void QuantizeCore(TensorDescriptor* x, TensorDescriptor* xi, TensorDescriptor* s, TensorDescriptor* m, QuantizeOptions options)
        {
            QuantizeParamsNative p;
            options.Fill(&p);
            Enter();
            try { Library.Check(NativeMethods.int8attn_quantize(handle, x, xi, s, m, &p)); }
            finally { Exit(); }
        }

        /// <summary>Rotate the interleaved channel pairs of host fp32 x [B, H, N, D] by token n's angles
        /// (int8attn_rotary): out[2i] = x[2i]·cos[n][2i] − x[2i+1]·sin[n][2i],
        /// out[2i+1] = x[2i+1]·cos[n][2i+1] + x[2i]·sin[n][2i+1] in float32 with the rounding steps of
        /// <paramref name="arithmetic"/> (by default each product and sum rounded on its own).
        /// <paramref name="cos"/> and <paramref name="sin"/> are fp32 [N, D] (row-major).</summary>
        public unsafe void Rotary(ReadOnlySpan<float> x, TensorLayout xLayout, ReadOnlySpan<float> cos, ReadOnlySpan<float> sin,
                                  Span<float> output, TensorLayout outputLayout,
                                  RotaryArithmetic arithmetic = RotaryArithmetic.Rounded)
        {
            xLayout.CheckBuffer(x.Length, 4, "x"); outputLayout.CheckBuffer(output.Length, 4, "output");
            if (xLayout.Shape.Length != 4)
                throw new Int8AttnException(Status.BadShape, "x: rank is " + xLayout.Shape.Length + "; it must be 4 [B, H, N, D]");
            var table = TensorLayout.Contiguous(DType.F32, xLayout.Shape[2], xLayout.Shape[3]);  // [N, D]
            table.CheckBuffer(cos.Length, 4, "cos"); table.CheckBuffer(sin.Length, 4, "sin");
            fixed (float* xp = &MemoryMarshal.GetReference(x))
            fixed (float* cp = &MemoryMarshal.GetReference(cos))
            fixed (float* sp = &MemoryMarshal.GetReference(sin))
            fixed (float* op = &MemoryMarshal.GetReference(output))
            {
                var xd = xLayout.Describe((IntPtr)xp); var cd = table.Describe((IntPtr)cp);
                var sd = table.Describe((IntPtr)sp); var od = outputLayout.Describe((IntPtr)op);
                Rotary(xd, cd, sd, od, default(IntPtr), arithmetic);
            }
        }

        /// <summary>Rotary embedding with descriptors (any device; <paramref name="output"/> may be x itself).</summary>
        public unsafe void Rotary(TensorDescriptor x, TensorDescriptor cos, TensorDescriptor sin, TensorDescriptor output,
                                  IntPtr stream = default(IntPtr), RotaryArithmetic arithmetic = RotaryArithmetic.Rounded)
        {
            RotaryParamsNative p;
            NativeMethods.int8attn_rotary_params_init(&p);
            p.Stream = stream;
            p.Arithmetic = (int)arithmetic;
            Enter();
            try { Library.Check(NativeMethods.int8attn_rotary(handle, &x, &cos, &sin, &output, &p)); }
            finally { Exit(); }
        }

        /// <summary>RMS-normalize each row of host fp32 x [B, H, N, D] over its D channels (int8attn_rms_norm):
        /// r = 1 / sqrt(mean(x²) + eps), output = x·r, times the fp32 per-channel <paramref name="weight"/> [D]
        /// when it is not empty (pass null or an empty span for none), bit-identical on every backend.
        /// <paramref name="output"/> may be x itself (the same buffer and layout: in place).</summary>
        public unsafe void RmsNorm(ReadOnlySpan<float> x, TensorLayout xLayout, ReadOnlySpan<float> weight,
                                   Span<float> output, TensorLayout outputLayout, float eps = 1e-6f)
        {
            xLayout.CheckBuffer(x.Length, 4, "x"); outputLayout.CheckBuffer(output.Length, 4, "output");
            if (xLayout.Shape.Length != 4)
                throw new Int8AttnException(Status.BadShape, "x: rank is " + xLayout.Shape.Length + "; it must be 4 [B, H, N, D]");
            var wLayout = TensorLayout.Contiguous(DType.F32, weight.Length);  // the library checks it against D
            fixed (float* xp = &MemoryMarshal.GetReference(x))
            fixed (float* wp = &MemoryMarshal.GetReference(weight))
            fixed (float* op = &MemoryMarshal.GetReference(output))
            {
                var xd = xLayout.Describe((IntPtr)xp); var wd = wLayout.Describe((IntPtr)wp);
                var od = outputLayout.Describe((IntPtr)op);
                RmsNormCore(&xd, weight.IsEmpty ? null : &wd, &od, eps, IntPtr.Zero);
            }
        }

        /// <summary>RMS normalization with descriptors (any device); <paramref name="weight"/> [D] null for none
        /// (fp16/bf16/fp32); <paramref name="output"/> (fp16/bf16/fp32) may be x itself (in place).</summary>
        public unsafe void RmsNorm(TensorDescriptor x, TensorDescriptor? weight, TensorDescriptor output,
                                   float eps = 1e-6f, IntPtr stream = default(IntPtr))
        {
            TensorDescriptor w = weight.HasValue ? weight.Value : default(TensorDescriptor);
            RmsNormCore(&x, weight.HasValue ? &w : null, &output, eps, stream);
        }

        unsafe void RmsNormCore(TensorDescriptor* x, TensorDescriptor* w, TensorDescriptor* o, float eps, IntPtr stream)
        {
            RmsNormParamsNative p;
            NativeMethods.int8attn_rms_norm_params_init(&p);
            p.Eps = eps;
            p.Stream = stream;
            Enter();
            try { Library.Check(NativeMethods.int8attn_rms_norm(handle, x, w, o, &p)); }
            finally { Exit(); }
        }

        /// <summary>Predict a uint8 block mask [B, Hq, ⌈Nq/q_block⌉, ⌈Nk/k_block⌉] from host fp32 Q and K.</summary>
        public unsafe void PredictBlockMask(ReadOnlySpan<float> q, TensorLayout qLayout, ReadOnlySpan<float> k, TensorLayout kLayout,
                                            Span<byte> mask, TensorLayout maskLayout, MaskOptions options = null)
        {
            qLayout.CheckBuffer(q.Length, 4, "q"); kLayout.CheckBuffer(k.Length, 4, "k");
            maskLayout.CheckBuffer(mask.Length, 1, "mask");
            fixed (float* qp = &MemoryMarshal.GetReference(q))
            fixed (float* kp = &MemoryMarshal.GetReference(k))
            fixed (byte* mp = &MemoryMarshal.GetReference(mask))
            {
                var qd = qLayout.Describe((IntPtr)qp); var kd = kLayout.Describe((IntPtr)kp); var md = maskLayout.Describe((IntPtr)mp);
                PredictBlockMask(qd, kd, md, options);
            }
        }

        /// <summary>Predict a block mask with descriptors.</summary>
        public unsafe void PredictBlockMask(TensorDescriptor q, TensorDescriptor k, TensorDescriptor mask, MaskOptions options = null)
        {
            MaskParamsNative p;
            (options ?? new MaskOptions()).Fill(&p);
            Enter();
            try { Library.Check(NativeMethods.int8attn_predict_block_mask(handle, &q, &k, &mask, &p)); }
            finally { Exit(); }
        }

        /// <summary>Make the context's own workspace at least <paramref name="bytes"/> large now
        /// (before capturing a CUDA graph: a call being captured cannot grow it).</summary>
        public void ReserveWorkspace(DeviceType device, ulong bytes)
        {
            Enter();
            try { Library.Check(NativeMethods.int8attn_context_reserve_workspace(handle, (int)device, bytes)); }
            finally { Exit(); }
        }

        /// <summary>Wait for the work queued on a stream (IntPtr.Zero = legacy default stream).</summary>
        public void Synchronize(IntPtr stream = default(IntPtr))
        {
            Enter();
            try { Library.Check(NativeMethods.int8attn_synchronize(handle, stream)); }
            finally { Exit(); }
        }

        internal void EnterForCache() { Enter(); }
        internal void ExitForCache() { Exit(); }
    }
}
