using System;
using System.Runtime.ConstrainedExecution;
using System.Runtime.InteropServices;

namespace Int8Attn
{
    /// <summary>Owns an int8attn_context_t; released with int8attn_context_destroy.</summary>
    public sealed class ContextHandle : SafeHandle
    {
        /// <summary>Used by the marshaller.</summary>
        public ContextHandle() : base(IntPtr.Zero, true) { }
        /// <inheritdoc/>
        public override bool IsInvalid { get { return handle == IntPtr.Zero; } }
        /// <inheritdoc/>
        protected override bool ReleaseHandle()
        {
            NativeMethods.int8attn_context_destroy(handle);
            return true;
        }
    }

    /// <summary>Owns an int8attn_policy_t; released with int8attn_policy_destroy.</summary>
    public sealed class PolicyHandle : SafeHandle
    {
        /// <summary>Used by the marshaller.</summary>
        public PolicyHandle() : base(IntPtr.Zero, true) { }
        /// <inheritdoc/>
        public override bool IsInvalid { get { return handle == IntPtr.Zero; } }
        /// <inheritdoc/>
        protected override bool ReleaseHandle()
        {
            NativeMethods.int8attn_policy_destroy(handle);
            return true;
        }
    }

    /// <summary>
    /// Owns an int8attn_kv_cache_t. The header requires the context to outlive the cache, so the
    /// handle holds a reference on its <see cref="ContextHandle"/> (DangerousAddRef) that it drops
    /// after destroying the cache: even finalizers run in the right order.
    /// </summary>
    public sealed class KvCacheHandle : SafeHandle
    {
        ContextHandle context;

        /// <summary>Used by the marshaller.</summary>
        public KvCacheHandle() : base(IntPtr.Zero, true) { }
        /// <inheritdoc/>
        public override bool IsInvalid { get { return handle == IntPtr.Zero; } }

        internal void KeepContextAlive(ContextHandle ctx)
        {
            bool added = false;
            ctx.DangerousAddRef(ref added);
            if (added) context = ctx;
        }

        /// <inheritdoc/>
        protected override bool ReleaseHandle()
        {
            NativeMethods.int8attn_kv_cache_destroy(handle);
            if (context != null) { context.DangerousRelease(); context = null; }
            return true;
        }
    }
}
