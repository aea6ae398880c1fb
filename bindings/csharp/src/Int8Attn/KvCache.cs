using System;
using System.Runtime.InteropServices;

namespace Int8Attn
{
    /// <summary>
    /// A persistent quantized K/V cache (int8attn_kv_cache_t): quantize K/V once (text
    /// cross-attention) or append as a sequence grows (decode), then run attention against it with
    /// <see cref="Context.Attention(ReadOnlySpan{float}, TensorLayout, KvCache, Span{float}, TensorLayout, ForwardOptions)"/>.
    /// The cache keeps its context's native handle alive. Appends use the context, so they follow the
    /// context's one-thread-at-a-time rule; the cache must not be written concurrently with any use.
    /// </summary>
    public sealed class KvCache : IDisposable
    {
        readonly KvCacheHandle handle;
        readonly Context context;

        /// <summary>Create an empty cache on the context.</summary>
        public unsafe KvCache(Context context, KvCacheOptions options)
        {
            if (context == null) throw new ArgumentNullException("context");
            if (options == null) throw new ArgumentNullException("options");
            KvCacheParamsNative p;
            NativeMethods.int8attn_kv_cache_params_init(&p);
            p.DeviceType = (int)options.DeviceType;
            p.Batch = options.Batch; p.NumKvHeads = options.NumKvHeads;
            p.Capacity = options.Capacity; p.HeadDim = options.HeadDim;
            p.Mode = (int)options.Mode; p.Flags = (uint)options.Flags; p.Stream = options.Stream;
            KvCacheHandle h;
            int st = NativeMethods.int8attn_kv_cache_create(out h, context.Handle, &p);
            if (st != 0) { if (h != null) h.Dispose(); Library.Check(st); }
            h.KeepContextAlive(context.Handle);
            handle = h;
            this.context = context;
        }

        /// <summary>The native handle.</summary>
        public KvCacheHandle Handle { get { return handle; } }

        /// <summary>Current length (tokens per sequence).</summary>
        public long Length
        {
            get { long n; Library.Check(NativeMethods.int8attn_kv_cache_length(out n, handle)); return n; }
        }

        /// <summary>Quantize and append host fp32 K and V [B, Hkv, n, D]; on error the cache is unchanged.</summary>
        public unsafe void Append(ReadOnlySpan<float> k, TensorLayout kLayout, ReadOnlySpan<float> v, TensorLayout vLayout)
        {
            kLayout.CheckBuffer(k.Length, 4, "k"); vLayout.CheckBuffer(v.Length, 4, "v");
            fixed (float* kp = &MemoryMarshal.GetReference(k))
            fixed (float* vp = &MemoryMarshal.GetReference(v))
            {
                Append(kLayout.Describe((IntPtr)kp), vLayout.Describe((IntPtr)vp), IntPtr.Zero);
            }
        }

        /// <summary>Quantize and append host fp16/bf16 K and V (ushort bit patterns).</summary>
        public unsafe void Append(ReadOnlySpan<ushort> k, TensorLayout kLayout, ReadOnlySpan<ushort> v, TensorLayout vLayout)
        {
            kLayout.CheckBuffer(k.Length, 2, "k"); vLayout.CheckBuffer(v.Length, 2, "v");
            fixed (ushort* kp = &MemoryMarshal.GetReference(k))
            fixed (ushort* vp = &MemoryMarshal.GetReference(v))
            {
                Append(kLayout.Describe((IntPtr)kp), vLayout.Describe((IntPtr)vp), IntPtr.Zero);
            }
        }

        /// <summary>Append K and V given as descriptors (e.g. device memory) on a stream.</summary>
        public unsafe void Append(TensorDescriptor k, TensorDescriptor v, IntPtr stream)
        {
            context.EnterForCache();
            try { Library.Check(NativeMethods.int8attn_kv_cache_append(handle, &k, &v, stream)); }
            finally { context.ExitForCache(); }
        }

        /// <summary>Set the length to 0 and forget the smoothing means.</summary>
        public void Reset() { Library.Check(NativeMethods.int8attn_kv_cache_reset(handle)); }

        /// <summary>Destroy the cache.</summary>
        public void Dispose() { handle.Dispose(); }
    }
}
