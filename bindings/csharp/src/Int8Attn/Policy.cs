using System;

namespace Int8Attn
{
    /// <summary>
    /// A timestep policy (int8attn_policy_t): maps each sampler step to a precision mode and a
    /// scale multiplier. Immutable after creation except through <see cref="SetMode"/>; concurrent
    /// reads (Get, attention calls using it) are safe while nobody calls SetMode.
    /// </summary>
    public sealed class Policy : IDisposable
    {
        readonly PolicyHandle handle;

        /// <summary>A policy of <paramref name="numTimesteps"/> steps with the library's defaults.</summary>
        public Policy(int numTimesteps) : this(new PolicyOptions { NumTimesteps = numTimesteps }) { }

        /// <summary>A policy with explicit options.</summary>
        public unsafe Policy(PolicyOptions options)
        {
            if (options == null) throw new ArgumentNullException("options");
            NativeLibraryLoader.EnsureLoaded();
            PolicyParamsNative p;
            NativeMethods.int8attn_policy_params_init(&p);
            p.NumTimesteps = options.NumTimesteps;
            p.DefaultMode = (int)options.DefaultMode;
            p.EdgeMode = (int)options.EdgeMode;
            p.NumFirstEdge = options.NumFirstEdge;
            p.NumLastEdge = options.NumLastEdge;
            p.SigmaEdgeAbove = options.SigmaEdgeAbove;
            p.SigmaEdgeBelow = options.SigmaEdgeBelow;
            float[] sigmas = options.Sigmas, mults = options.ScaleMultipliers;
            if (mults != null)
            {
                int t = p.NumTimesteps > 0 ? p.NumTimesteps : (sigmas != null ? sigmas.Length : 0);
                if (mults.Length != t)
                    throw new Int8AttnException(Status.BadValue, "ScaleMultipliers has " + mults.Length + " entries but the policy has " + t + " steps");
            }
            PolicyHandle h;
            int st;
            fixed (float* sp = sigmas)
            fixed (float* mp = mults)
            {
                p.Sigmas = (IntPtr)sp;
                p.NumSigmas = sigmas != null ? sigmas.Length : 0;
                p.ScaleMultipliers = (IntPtr)mp;
                st = NativeMethods.int8attn_policy_create(out h, &p);
            }
            if (st != 0) { if (h != null) h.Dispose(); Library.Check(st); }
            handle = h;
        }

        /// <summary>The native handle.</summary>
        public PolicyHandle Handle { get { return handle; } }

        /// <summary>Number of steps T.</summary>
        public int NumTimesteps
        {
            get { int t; Library.Check(NativeMethods.int8attn_policy_num_timesteps(out t, handle)); return t; }
        }

        /// <summary>The mode chosen for a step.</summary>
        public Mode GetMode(int timestep) { Mode m; float s; Get(timestep, out m, out s); return m; }

        /// <summary>The mode and scale multiplier chosen for a step.</summary>
        public unsafe void Get(int timestep, out Mode mode, out float scaleMultiplier)
        {
            int m; float s;
            Library.Check(NativeMethods.int8attn_policy_get(&m, &s, handle, timestep));
            mode = (Mode)m; scaleMultiplier = s;
        }

        /// <summary>Override the mode of one step (not concurrently with any use of the policy).</summary>
        public void SetMode(int timestep, Mode mode)
        {
            Library.Check(NativeMethods.int8attn_policy_set_mode(handle, timestep, (int)mode));
        }

        /// <summary>Destroy the policy.</summary>
        public void Dispose() { handle.Dispose(); }
    }
}
