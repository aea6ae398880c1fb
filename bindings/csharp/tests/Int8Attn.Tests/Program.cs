// Test program of the int8attn C# bindings: a plain console application with its own assertions
// (no test framework, so Mono's mcs can build it without NuGet). Runs against the CPU backend.
//
//   mono Int8Attn.Tests.exe [path/to/tests/abi/int8attn_abi_baseline.inc]
//
// Prints one line per test and "N passed, M failed"; exits 1 if anything failed.
using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Reflection;
using System.Runtime.InteropServices;
using System.Text.RegularExpressions;
using System.Threading;
using Int8Attn;

static class Program
{
    static int passed, failed;

    static void Run(string name, Action body)
    {
        try
        {
            body();
            passed++;
            Console.WriteLine("PASS " + name);
        }
        catch (Exception e)
        {
            failed++;
            Console.WriteLine("FAIL " + name + ": " + e.GetType().Name + ": " + e.Message);
        }
    }

    static void Assert(bool cond, string what)
    {
        if (!cond) throw new Exception("assertion failed: " + what);
    }

    static T Throws<T>(Action body) where T : Exception
    {
        try { body(); }
        catch (T e) { return e; }
        throw new Exception("expected " + typeof(T).Name);
    }

    // ---- data and a float64 reference ------------------------------------------------------

    static float[] Data(int len, ulong seed, int d, float bias)
    {
        var r = new float[len];
        ulong s = seed * 6364136223846793005UL + 1442695040888963407UL;
        for (int i = 0; i < len; i++)
        {
            s = s * 6364136223846793005UL + 1442695040888963407UL;
            double u = (double)(s >> 33) / (1UL << 31) * 2.0 - 1.0;
            r[i] = (float)u + bias * ((i % d) % 3);
        }
        return r;
    }

    static float[] Reference(int b, int hq, int hkv, int nq, int nk, int d, float[] q, float[] k, float[] v,
                             bool causal, int[] lengths, float[] lseOut)
    {
        double scale = 1.0 / Math.Sqrt(d);
        int g = hq / hkv;
        var o = new float[b * hq * nq * d];
        for (int bi = 0; bi < b; bi++)
        {
            int len = lengths != null ? lengths[bi] : nk;
            for (int h = 0; h < hq; h++)
            {
                int hk = h / g;
                for (int i = 0; i < nq; i++)
                {
                    var js = new List<int>(); var ss = new List<double>();
                    for (int j = 0; j < len; j++)
                    {
                        if (causal && j > i + len - nq) continue;
                        double s = 0;
                        for (int c = 0; c < d; c++)
                            s += (double)q[((bi * hq + h) * nq + i) * d + c] * k[((bi * hkv + hk) * nk + j) * d + c];
                        js.Add(j); ss.Add(s * scale);
                    }
                    int row = (bi * hq + h) * nq + i;
                    if (js.Count == 0) { if (lseOut != null) lseOut[row] = float.NegativeInfinity; continue; }
                    double m = ss.Max(), z = ss.Sum(x => Math.Exp(x - m));
                    if (lseOut != null) lseOut[row] = (float)(m + Math.Log(z));
                    for (int c = 0; c < d; c++)
                    {
                        double acc = 0;
                        for (int t = 0; t < js.Count; t++)
                            acc += Math.Exp(ss[t] - m) / z * v[((bi * hkv + hk) * nk + js[t]) * d + c];
                        o[row * d + c] = (float)acc;
                    }
                }
            }
        }
        return o;
    }

    static float MaxDiff(float[] a, float[] b)
    {
        Assert(a.Length == b.Length, "lengths match");
        float m = 0;
        for (int i = 0; i < a.Length; i++) m = Math.Max(m, Math.Abs(a[i] - b[i]));
        return m;
    }

    static float[] Attn(Context ctx, int b, int hq, int hkv, int nq, int nk, int d, float[] q, float[] k, float[] v, ForwardOptions opt)
    {
        var o = new float[q.Length];
        var ql = TensorLayout.Contiguous(DType.F32, b, hq, nq, d);
        var kl = TensorLayout.Contiguous(DType.F32, b, hkv, nk, d);
        ctx.Attention(q, ql, k, kl, v, kl, o, ql, opt);
        return o;
    }

    // ---- the ABI baseline ------------------------------------------------------------------

    static readonly Dictionary<string, string> StructTypes = new Dictionary<string, string>
    {
        { "int8attn_tensor_t", "Int8Attn.TensorDescriptor" },
        { "int8attn_context_params_t", "Int8Attn.ContextParamsNative" },
        { "int8attn_policy_params_t", "Int8Attn.PolicyParamsNative" },
        { "int8attn_forward_params_t", "Int8Attn.ForwardParamsNative" },
        { "int8attn_quantize_params_t", "Int8Attn.QuantizeParamsNative" },
        { "int8attn_kv_cache_params_t", "Int8Attn.KvCacheParamsNative" },
        { "int8attn_mask_params_t", "Int8Attn.MaskParamsNative" },
    };

    static readonly Dictionary<string, Type> EnumPrefixes = new Dictionary<string, Type>
    {
        { "INT8ATTN_ERROR_", typeof(Status) }, { "INT8ATTN_MODE_", typeof(Mode) }, { "INT8ATTN_DTYPE_", typeof(DType) },
        { "INT8ATTN_DEVICE_", typeof(DeviceType) }, { "INT8ATTN_GRANULARITY_", typeof(Granularity) },
        { "INT8ATTN_FLAG_", typeof(AttentionFlags) }, { "INT8ATTN_FEATURE_", typeof(Features) },
    };

    // The header's numeric macros and their C# copies (the baseline lists some of them).
    static readonly Dictionary<string, long> Macros = new Dictionary<string, long>
    {
        { "INT8ATTN_ABI_VERSION", Library.AbiVersion }, { "INT8ATTN_MAX_RANK", Constants.MaxRank },
        { "INT8ATTN_QUANT_BLOCK", Constants.QuantBlock }, { "INT8ATTN_MAX_HEAD_DIM", Constants.MaxHeadDim },
        { "INT8ATTN_MASK_Q_BLOCK_DEFAULT", Constants.MaskQBlockDefault },
        { "INT8ATTN_MASK_K_BLOCK_DEFAULT", Constants.MaskKBlockDefault },
    };
    // Macros with no C# copy: the loaded library reports its own version.
    static readonly string[] MacrosNotMirrored = { "INT8ATTN_VERSION_MAJOR", "INT8ATTN_VERSION_MINOR", "INT8ATTN_VERSION_PATCH" };

    static string Norm(string s) { return s.Replace("_", "").ToUpperInvariant(); }

    // Every integer #define of include/int8attn.h has a C# copy with the same value, and no copy
    // names a macro the header lacks.
    static void CheckHeaderMacros(string header)
    {
        var text = Regex.Replace(File.ReadAllText(header), @"/\*.*?\*/|//[^\n]*", " ", RegexOptions.Singleline);
        var found = new Dictionary<string, long>();
        foreach (Match m in Regex.Matches(text, @"^[ \t]*#[ \t]*define[ \t]+(INT8ATTN_\w+)[ \t]+(\d+)[uU]?[ \t]*\r?$", RegexOptions.Multiline))
            found[m.Groups[1].Value] = long.Parse(m.Groups[2].Value);
        Assert(found.ContainsKey("INT8ATTN_MAX_RANK") && found.Count >= Macros.Count, "parsed " + found.Count + " macros of " + header);
        foreach (var kv in found)
        {
            if (MacrosNotMirrored.Contains(kv.Key)) continue;
            Assert(Macros.ContainsKey(kv.Key), kv.Key + " = " + kv.Value + " has no C# copy (Constants in Native.cs)");
            Assert(Macros[kv.Key] == kv.Value, "C# copy of " + kv.Key + " is " + Macros[kv.Key] + ", the header has " + kv.Value);
        }
        foreach (var name in Macros.Keys)
            Assert(found.ContainsKey(name), "C# copies " + name + ", which the header does not define");
    }

    static void CheckBaseline(string path)
    {
        Assembly asm = typeof(Context).Assembly;
        var lines = File.ReadAllLines(path);
        var seenFields = new Dictionary<string, int>();
        var seenEnum = new HashSet<string>();
        int structs = 0, fields = 0, consts = 0, functions = 0;
        var natives = typeof(Context).Assembly.GetType("Int8Attn.NativeMethods+Imports")
            .GetMethods(BindingFlags.Static | BindingFlags.NonPublic | BindingFlags.Public)
            .Where(m => m.GetCustomAttributes(typeof(DllImportAttribute), false).Length > 0)
            .Select(m => m.Name).ToList();
        foreach (var raw in lines)
        {
            var line = raw.Trim();
            Match m;
            if ((m = Regex.Match(line, @"^INT8ATTN_ABI_STRUCT\((\w+), (\d+), (\d+)\)$")).Success)
            {
                Type t = asm.GetType(StructTypes[m.Groups[1].Value], true);
                Assert(Marshal.SizeOf(t) == int.Parse(m.Groups[2].Value),
                    "Marshal.SizeOf(" + t.Name + ") = " + Marshal.SizeOf(t) + ", baseline " + m.Groups[2].Value);
                structs++;
            }
            else if ((m = Regex.Match(line, @"^INT8ATTN_ABI_FIELD\((\w+), (\w+), (\d+), (\d+)\)$")).Success)
            {
                Type t = asm.GetType(StructTypes[m.Groups[1].Value], true);
                string cname = m.Groups[2].Value;
                FieldInfo fi = t.GetFields(BindingFlags.Instance | BindingFlags.Public | BindingFlags.NonPublic)
                    .FirstOrDefault(x => Norm(x.Name) == Norm(cname));
                Assert(fi != null, t.Name + " has no field for C field " + cname);
                string fname = fi.Name;
                long off = (long)Marshal.OffsetOf(t, fname);
                Assert(off == long.Parse(m.Groups[3].Value), t.Name + "." + fname + " offset " + off + ", baseline " + m.Groups[3].Value);
                int size = Marshal.SizeOf(fi.FieldType);
                Assert(size == int.Parse(m.Groups[4].Value), t.Name + "." + fname + " size " + size + ", baseline " + m.Groups[4].Value);
                int n; seenFields.TryGetValue(t.FullName, out n); seenFields[t.FullName] = n + 1;
                fields++;
            }
            else if ((m = Regex.Match(line, @"^INT8ATTN_ABI_CONST\((\w+), (-?\d+)\)$")).Success)
            {
                string name = m.Groups[1].Value; long value = long.Parse(m.Groups[2].Value);
                consts++;
                if (name == "INT8ATTN_OK") { Assert((int)Status.Ok == value, "Status.Ok"); continue; }
                if (Macros.ContainsKey(name)) { Assert(Macros[name] == value, name + " = " + Macros[name] + ", baseline " + value); continue; }
                var prefix = EnumPrefixes.Keys.FirstOrDefault(p => name.StartsWith(p));
                Assert(prefix != null, "no C# enum for " + name);
                Type et = EnumPrefixes[prefix];
                string member = Enum.GetNames(et).FirstOrDefault(x => Norm(x) == Norm(name.Substring(prefix.Length)));
                Assert(member != null, et.Name + " lacks a member for " + name);
                long actual = Convert.ToInt64(Enum.Parse(et, member));
                Assert(actual == value, et.Name + "." + member + " = " + actual + ", baseline " + value);
                seenEnum.Add(et.Name + "." + member);
            }
            else if ((m = Regex.Match(line, @"^INT8ATTN_ABI_VERSION_ENTRY\((\d+)\)$")).Success)
            {
                Assert(Library.AbiVersion == uint.Parse(m.Groups[1].Value), "Library.AbiVersion matches the baseline");
            }
            else if ((m = Regex.Match(line, @"^INT8ATTN_ABI_FUNCTION\((\w+)\)$")).Success)
            {
                Assert(natives.Contains(m.Groups[1].Value), "no P/Invoke declaration for " + m.Groups[1].Value);
                functions++;
            }
        }
        Assert(structs == 7 && fields > 50 && consts > 40 && functions == 34,
            "parsed the baseline (" + structs + " structs, " + fields + " fields, " + consts + " consts, " + functions + " functions)");
        // Every C# mirror field is in the baseline (no extra or missing fields).
        foreach (var kv in StructTypes)
        {
            Type t = asm.GetType(kv.Value, true);
            int declared = t.GetFields(BindingFlags.Instance | BindingFlags.Public | BindingFlags.NonPublic).Length;
            Assert(seenFields[t.FullName] == declared, t.Name + " declares " + declared + " fields, baseline lists " + seenFields[t.FullName]);
        }
        // Every C# enum member mirrors a baseline enumerator.
        foreach (Type et in EnumPrefixes.Values)
            foreach (string member in Enum.GetNames(et))
            {
                if (member == "None" || member == "AbiMismatch" || (et == typeof(Status) && member == "Ok")) continue;
                Assert(seenEnum.Contains(et.Name + "." + member), et.Name + "." + member + " is not in the ABI baseline");
            }
    }

    // ---- tests ----------------------------------------------------------------------------

    static int Main(string[] args)
    {
        string baseline = args.Length > 0 ? args[0] : Environment.GetEnvironmentVariable("INT8ATTN_ABI_BASELINE");
        const int B = 2, H = 2, N = 70, D = 40;
        float[] q = Data(B * H * N * D, 1, D, 0f), k = Data(B * H * N * D, 2, D, 0.5f), v = Data(B * H * N * D, 3, D, 0.25f);

        Run("library loads and reports its version", () =>
        {
            Assert(Library.LoadedAbiVersion == Library.AbiVersion, "ABI version");
            Assert(Library.Version == Library.BindingsVersion, "version string " + Library.Version);
            Assert(Library.VersionNumber == 100, "version number");
            Assert((Library.Features & Features.Cpu) != 0, "CPU feature");
            Assert(Library.DeviceCount >= 0, "device count");
            Assert(Library.StatusString(Status.BadShape).Length > 0, "status string");
        });

        if (failed > 0)
        {
            Console.WriteLine("the native library did not load; skipping the remaining tests");
            Console.WriteLine(passed + " passed, " + failed + " failed");
            return 1;
        }

        Run("struct layouts and enum values match the ABI baseline", () =>
        {
            if (string.IsNullOrEmpty(baseline)) throw new Exception("pass the path of tests/abi/int8attn_abi_baseline.inc");
            CheckBaseline(baseline);
        });

        Run("constants match the macros of include/int8attn.h", () =>
        {
            if (string.IsNullOrEmpty(baseline)) throw new Exception("pass the path of tests/abi/int8attn_abi_baseline.inc");
            // The baseline lives in tests/abi/ of the source tree, next to include/.
            string header = Path.GetFullPath(Path.Combine(Path.GetDirectoryName(Path.GetFullPath(baseline)), "..", "..", "include", "int8attn.h"));
            CheckHeaderMacros(header);
            Assert(TensorDescriptor.MaxRank == Constants.MaxRank, "TensorDescriptor.MaxRank");
            var f = new ForwardOptions(); var mo = new MaskOptions();
            Assert(f.MaskQBlock == Constants.MaskQBlockDefault && f.MaskKBlock == Constants.MaskKBlockDefault,
                   "ForwardOptions mask blocks " + f.MaskQBlock + "x" + f.MaskKBlock);
            Assert(mo.QBlock == Constants.MaskQBlockDefault && mo.KBlock == Constants.MaskKBlockDefault,
                   "MaskOptions blocks " + mo.QBlock + "x" + mo.KBlock);
        });

        Run("EXACT matches a float64 reference", () =>
        {
            using (var ctx = new Context())
            {
                var o = Attn(ctx, B, H, H, N, N, D, q, k, v, new ForwardOptions { Mode = Mode.Exact });
                var r = Reference(B, H, H, N, N, D, q, k, v, false, null, null);
                Assert(MaxDiff(o, r) < 1e-4f, "EXACT error " + MaxDiff(o, r));
            }
        });

        Run("BALANCED and FAST are close to the reference", () =>
        {
            using (var ctx = new Context())
            {
                var r = Reference(B, H, H, N, N, D, q, k, v, false, null, null);
                var ob = Attn(ctx, B, H, H, N, N, D, q, k, v, new ForwardOptions { Mode = Mode.Balanced });
                var of = Attn(ctx, B, H, H, N, N, D, q, k, v, new ForwardOptions { Mode = Mode.Fast });
                var od = Attn(ctx, B, H, H, N, N, D, q, k, v, null);
                Assert(MaxDiff(ob, r) < 2e-2f, "BALANCED error " + MaxDiff(ob, r));
                Assert(MaxDiff(of, r) < 6e-2f, "FAST error " + MaxDiff(of, r));
                Assert(MaxDiff(od, ob) == 0f, "default mode is BALANCED");
            }
        });

        Run("causal, GQA, valid lengths and LSE", () =>
        {
            int b = 2, hq = 4, hkv = 2, nq = 33, nk = 77, d = 64;
            float[] q2 = Data(b * hq * nq * d, 4, d, 0), k2 = Data(b * hkv * nk * d, 5, d, 0.5f), v2 = Data(b * hkv * nk * d, 6, d, 0.1f);
            var lengths = new[] { 77, 50 };
            var lseRef = new float[b * hq * nq];
            var r = Reference(b, hq, hkv, nq, nk, d, q2, k2, v2, true, lengths, lseRef);
            var lse = new float[b * hq * nq];
            using (var ctx = new Context())
            {
                var o = Attn(ctx, b, hq, hkv, nq, nk, d, q2, k2, v2,
                             new ForwardOptions { Mode = Mode.Exact, Causal = true, KLengths = lengths, Lse = lse });
                Assert(MaxDiff(o, r) < 1e-4f, "O error " + MaxDiff(o, r));
                Assert(MaxDiff(lse, lseRef) < 1e-4f, "LSE error " + MaxDiff(lse, lseRef));
            }
        });

        Run("NHD strides give the HND result", () =>
        {
            using (var ctx = new Context())
            {
                var o = Attn(ctx, B, H, H, N, N, D, q, k, v, new ForwardOptions { Mode = Mode.Exact });
                Func<float[], float[]> toNhd = x =>
                {
                    var y = new float[x.Length];
                    for (int b = 0; b < B; b++) for (int h = 0; h < H; h++) for (int n = 0; n < N; n++) for (int c = 0; c < D; c++)
                        y[((b * N + n) * H + h) * D + c] = x[((b * H + h) * N + n) * D + c];
                    return y;
                };
                var nhd = TensorLayout.Nhd(DType.F32, B, H, N, D);
                var on = new float[o.Length];
                ctx.Attention(toNhd(q), nhd, toNhd(k), nhd, toNhd(v), nhd, on, nhd, new ForwardOptions { Mode = Mode.Exact });
                Assert(MaxDiff(on, toNhd(o)) < 1e-6f, "NHD vs HND");
            }
        });

        Run("fp16 buffers (ushort bits)", () =>
        {
            Func<float[], ushort[]> h = x => x.Select(HalfBits.FromSingle).ToArray();
            Func<ushort[], float[]> f = x => x.Select(HalfBits.ToSingle).ToArray();
            ushort[] qh = h(q), kh = h(k), vh = h(v), oh = new ushort[q.Length];
            var l = TensorLayout.Contiguous(DType.F16, B, H, N, D);
            using (var ctx = new Context())
                ctx.Attention(qh, l, kh, l, vh, l, oh, l, new ForwardOptions { Mode = Mode.Exact });
            var r = Reference(B, H, H, N, N, D, f(qh), f(kh), f(vh), false, null, null);
            Assert(MaxDiff(f(oh), r) < 2e-3f, "fp16 error " + MaxDiff(f(oh), r));
            Assert(HalfBits.FromSingle(1.0f) == 0x3c00 && HalfBits.ToSingle(0x3c00) == 1.0f, "half conversion");
            Assert(HalfBits.BF16FromSingle(1.0f) == 0x3f80 && HalfBits.BF16ToSingle(0x3f80) == 1.0f, "bf16 conversion");
        });

        Run("errors carry the status and the library's message, and write nothing", () =>
        {
            using (var ctx = new Context())
            {
                var x = Enumerable.Repeat(0.5f, 16 * 12).ToArray();
                var o = Enumerable.Repeat(7f, 16 * 12).ToArray();
                var l = TensorLayout.Contiguous(DType.F32, 1, 1, 16, 12);
                var e = Throws<Int8AttnException>(() => ctx.Attention(x, l, x, l, x, l, o, l));
                Assert(e.Status == Status.UnsupportedHeadDim, "status " + e.Status);
                Assert(e.NativeMessage.Contains("12"), "message names the value: " + e.NativeMessage);
                Assert(e.Message.Contains("202"), "Message has the code: " + e.Message);
                Assert(o.All(t => t == 7f), "output untouched");

                var a = new float[16 * 8];
                var la = TensorLayout.Contiguous(DType.F32, 1, 1, 16, 8);
                e = Throws<Int8AttnException>(() => ctx.Attention(a, la, a, la, a, la, new float[16 * 8], la, new ForwardOptions { SmScale = float.NaN }));
                Assert(e.Status == Status.BadValue, "NaN scale: " + e.Status);
                // Too-short buffers are caught before the call.
                e = Throws<Int8AttnException>(() => ctx.Attention(a, TensorLayout.Contiguous(DType.F32, 1, 1, 17, 8), a, la, a, la, new float[17 * 8], TensorLayout.Contiguous(DType.F32, 1, 1, 17, 8)));
                Assert(e.Status == Status.BadShape, "short buffer: " + e.Status);
                // Wrong element type for the layout.
                e = Throws<Int8AttnException>(() => ctx.Attention(a, TensorLayout.Contiguous(DType.F16, 1, 1, 16, 8), a, la, a, la, new float[16 * 8], la));
                Assert(e.Status == Status.BadDtype, "dtype: " + e.Status);
                var ce = Throws<Int8AttnException>(() => new Context(new ContextOptions { NumThreads = -1 }));
                Assert(ce.Status == Status.BadValue, "negative threads: " + ce.Status);
            }
        });

        Run("descriptor API and workspace queries", () =>
        {
            using (var ctx = new Context(new ContextOptions { NumThreads = 1 }))
            {
                var qh = GCHandle.Alloc(q, GCHandleType.Pinned); var kh = GCHandle.Alloc(k, GCHandleType.Pinned);
                var vh = GCHandle.Alloc(v, GCHandleType.Pinned); var o = new float[q.Length]; var oh = GCHandle.Alloc(o, GCHandleType.Pinned);
                try
                {
                    var shape = new long[] { B, H, N, D };
                    var qd = TensorDescriptor.Create(qh.AddrOfPinnedObject(), DeviceType.Cpu, 0, DType.F32, shape);
                    var kd = TensorDescriptor.Create(kh.AddrOfPinnedObject(), DeviceType.Cpu, 0, DType.F32, shape);
                    var vd = TensorDescriptor.Create(vh.AddrOfPinnedObject(), DeviceType.Cpu, 0, DType.F32, shape);
                    var od = TensorDescriptor.Create(oh.AddrOfPinnedObject(), DeviceType.Cpu, 0, DType.F32, shape);
                    ulong ws = ctx.AttentionWorkspaceSize(qd, kd, vd, null);
                    ctx.ReserveWorkspace(DeviceType.Cpu, Math.Max(ws, 4096));
                    ctx.Attention(qd, kd, vd, od, new ForwardOptions { Mode = Mode.Balanced });
                    ctx.Synchronize();
                    using (var ctx2 = new Context())
                    {
                        var o2 = Attn(ctx2, B, H, H, N, N, D, q, k, v, new ForwardOptions { Mode = Mode.Balanced });
                        Assert(MaxDiff(o, o2) == 0f, "1 thread and all threads give the same bits");
                    }
                    // CUDA descriptors without CUDA: a clean error, not a crash.
                    if ((Library.Features & Features.Cuda) == 0)
                    {
                        var cd = TensorDescriptor.Create(new IntPtr(0x1000), DeviceType.Cuda, 0, DType.F16, shape);
                        var e = Throws<Int8AttnException>(() => ctx.Attention(cd, cd, cd, cd));
                        Assert(e.Status == Status.BackendUnavailable || e.Status == Status.BadDevice || e.Status == Status.Aliasing,
                               "CUDA without CUDA: " + e.Status + " " + e.NativeMessage);
                    }
                }
                finally { qh.Free(); kh.Free(); vh.Free(); oh.Free(); }
            }
        });

        Run("timestep policy", () =>
        {
            using (var p = new Policy(10))
            {
                Assert(p.NumTimesteps == 10, "T");
                Assert(p.GetMode(0) == Mode.Exact && p.GetMode(5) == Mode.Fast && p.GetMode(9) == Mode.Exact, "default edges");
                p.SetMode(5, Mode.Balanced);
                Assert(p.GetMode(5) == Mode.Balanced, "set_mode");
                var e = Throws<Int8AttnException>(() => p.GetMode(10));
                Assert(e.Status == Status.BadValue, "out of range: " + e.Status);
            }
            var mults = new[] { 1f, 0.9f, 0.8f, 0.7f };
            using (var p = new Policy(new PolicyOptions { NumTimesteps = 4, DefaultMode = Mode.Balanced, NumFirstEdge = 0, ScaleMultipliers = mults }))
            {
                Mode m; float s;
                p.Get(2, out m, out s);
                Assert(m == Mode.Balanced && s == 0.8f, "multiplier " + s);
                Assert(p.GetMode(3) == Mode.Exact, "last edge");
            }
            using (var p = new Policy(new PolicyOptions { Sigmas = new[] { 14.6f, 8f, 3f, 1f, 0.3f, 0.03f }, NumFirstEdge = 0, NumLastEdge = 0, SigmaEdgeAbove = 10f, SigmaEdgeBelow = 0.1f }))
            {
                Assert(p.NumTimesteps == 6, "T from sigmas");
                Assert(p.GetMode(0) == Mode.Exact && p.GetMode(2) == Mode.Fast && p.GetMode(5) == Mode.Exact, "sigma edges");
            }
            var pe = Throws<Int8AttnException>(() => new Policy(0));
            Assert(pe.Status == Status.BadValue, "zero steps: " + pe.Status);
        });

        Run("forward with a policy uses the step's mode", () =>
        {
            using (var ctx = new Context())
            using (var p = new Policy(20))
            {
                var exact = Attn(ctx, B, H, H, N, N, D, q, k, v, new ForwardOptions { Mode = Mode.Exact });
                var fast = Attn(ctx, B, H, H, N, N, D, q, k, v, new ForwardOptions { Mode = Mode.Fast });
                var at0 = Attn(ctx, B, H, H, N, N, D, q, k, v, new ForwardOptions { Policy = p, Timestep = 0 });
                var at7 = Attn(ctx, B, H, H, N, N, D, q, k, v, new ForwardOptions { Policy = p, Timestep = 7 });
                Assert(MaxDiff(at0, exact) == 0f && MaxDiff(at7, fast) == 0f, "policy modes");
            }
        });

        Run("K/V cache append and attention", () =>
        {
            int hq = 4, hkv = 2, nq = 3, nk = 100, d = 64;
            float[] q2 = Data(hq * nq * d, 7, d, 0), k2 = Data(hkv * nk * d, 8, d, 0.5f), v2 = Data(hkv * nk * d, 9, d, 0.1f);
            var r = Reference(1, hq, hkv, nq, nk, d, q2, k2, v2, false, null, null);
            using (var ctx = new Context())
            using (var cache = new KvCache(ctx, new KvCacheOptions(1, hkv, 128, d) { DeviceType = DeviceType.Cpu }))
            {
                Assert(cache.Length == 0, "empty");
                // Two appends (60 + 40 tokens) as strided views into the full K/V: shape [1, 2, n, 64]
                // with the full tensor's strides, starting at token offset `start`.
                foreach (var chunk in new[] { new[] { 0, 60 }, new[] { 60, 40 } })
                {
                    var layout = new TensorLayout(DType.F32, new long[] { 1, hkv, chunk[1], d }, new long[] { hkv * nk * d, nk * d, d, 1 });
                    cache.Append(new ReadOnlySpan<float>(k2, chunk[0] * d, k2.Length - chunk[0] * d), layout,
                                 new ReadOnlySpan<float>(v2, chunk[0] * d, v2.Length - chunk[0] * d), layout);
                }
                Assert(cache.Length == 100, "length " + cache.Length);
                var o = new float[q2.Length];
                var ql = TensorLayout.Contiguous(DType.F32, 1, hq, nq, d);
                ctx.Attention(q2, ql, cache, o, ql);
                Assert(MaxDiff(o, r) < 3e-2f, "cache error " + MaxDiff(o, r));
                var extra = new float[hkv * 40 * d];
                var el = TensorLayout.Contiguous(DType.F32, 1, hkv, 40, d);
                var e = Throws<Int8AttnException>(() => cache.Append(extra, el, extra, el));
                Assert(e.Status == Status.CapacityExceeded && cache.Length == 100, "capacity: " + e.Status);
                cache.Reset();
                Assert(cache.Length == 0, "reset");
            }
        });

        Run("a cache keeps its context's native handle alive", () =>
        {
            var ctx = new Context();
            var cache = new KvCache(ctx, new KvCacheOptions(1, 1, 16, 8) { DeviceType = DeviceType.Cpu });
            ctx.Dispose();                      // the native context survives until the cache is gone
            Assert(cache.Length == 0, "cache still usable");
            cache.Dispose();
            Assert(ctx.Handle.IsClosed, "context closed");
        });

        Run("quantize round-trips within half a step", () =>
        {
            int h = 2, n = 100, d = 32, g = (n + Constants.QuantBlock - 1) / Constants.QuantBlock;
            var x = Data(h * n * d, 11, d, 0.3f);
            var xi = new sbyte[x.Length]; var scales = new float[h * g]; var mean = new float[h * d];
            using (var ctx = new Context())
            {
                ctx.Quantize(x, TensorLayout.Contiguous(DType.F32, 1, h, n, d), xi, scales, mean, new QuantizeOptions { Smooth = true });
                for (int hi = 0; hi < h; hi++) for (int t = 0; t < n; t++) for (int c = 0; c < d; c++)
                {
                    int idx = (hi * n + t) * d + c;
                    float s = scales[hi * g + t / Constants.QuantBlock];
                    float back = xi[idx] * s + mean[hi * d + c];
                    Assert(Math.Abs(back - x[idx]) <= 0.5f * s * 1.001f + 1e-6f, "element " + idx);
                }
                var e = Throws<Int8AttnException>(() => ctx.Quantize(x, TensorLayout.Contiguous(DType.F32, 1, h, n, d), xi, scales, Span<float>.Empty, new QuantizeOptions { Smooth = true }));
                Assert((int)e.Status >= 100 && (int)e.Status < 200, "smooth without mean: " + e.Status);
            }
        });

        Run("block mask prediction and use", () =>
        {
            int hq = 2, nq = 128, nk = 256, d = 64;
            float[] q2 = Data(hq * nq * d, 12, d, 0), k2 = Data(hq * nk * d, 13, d, 0.5f), v2 = Data(hq * nk * d, 14, d, 0.1f);
            var mask = new byte[hq * 2 * 4];
            var ml = TensorLayout.Contiguous(DType.U8, 1, hq, 2, 4);
            using (var ctx = new Context())
            {
                ctx.PredictBlockMask(q2, TensorLayout.Contiguous(DType.F32, 1, hq, nq, d), k2, TensorLayout.Contiguous(DType.F32, 1, hq, nk, d),
                                     mask, ml, new MaskOptions { QBlock = 64, KBlock = 64, KeepRatio = 1f });
                Assert(mask.All(m => m != 0), "keep_ratio 1 keeps all blocks");
                var dense = Attn(ctx, 1, hq, hq, nq, nk, d, q2, k2, v2, new ForwardOptions { Mode = Mode.Exact });
                var masked = Attn(ctx, 1, hq, hq, nq, nk, d, q2, k2, v2,
                                  new ForwardOptions { Mode = Mode.Exact, BlockMask = mask, BlockMaskLayout = ml, MaskQBlock = 64, MaskKBlock = 64 });
                Assert(MaxDiff(dense, masked) == 0f, "all-keep mask equals dense");
            }
        });

        Run("one context per thread; concurrent use of one context is refused", () =>
        {
            using (var p = new Policy(8))
            {
                float[] expected;
                using (var ctx = new Context()) expected = Attn(ctx, B, H, H, N, N, D, q, k, v, new ForwardOptions { Policy = p, Timestep = 3 });
                var results = new float[2][];
                var threads = Enumerable.Range(0, 2).Select(i => new Thread(() =>
                {
                    using (var ctx = new Context())
                        results[i] = Attn(ctx, B, H, H, N, N, D, q, k, v, new ForwardOptions { Policy = p, Timestep = 3 });
                })).ToList();
                threads.ForEach(t => t.Start());
                threads.ForEach(t => t.Join());
                Assert(results.All(r => r != null && MaxDiff(r, expected) == 0f), "threads agree");
            }
            // Two threads hammering one context: overlapping calls are refused (InvalidOperationException), none may crash or fail otherwise.
            using (var ctx = new Context(new ContextOptions { NumThreads = 1 }))
            {
                int refused = 0, errors = 0;
                var big = Data(1 * 2 * 512 * 64, 15, 64, 0);
                var threads = Enumerable.Range(0, 2).Select(i => new Thread(() =>
                {
                    for (int it = 0; it < 20; it++)
                    {
                        try { Attn(ctx, 1, 2, 2, 512, 512, 64, big, big, big, null); }
                        catch (InvalidOperationException) { Interlocked.Increment(ref refused); }
                        catch (Exception) { Interlocked.Increment(ref errors); }
                    }
                })).ToList();
                threads.ForEach(t => t.Start());
                threads.ForEach(t => t.Join());
                Assert(errors == 0, "no other errors");
                Console.WriteLine("     (" + refused + " concurrent calls refused)");
            }
        });

        Run("a missing library gives an actionable DllNotFoundException", () =>
        {
            // Checked in a child process so this process keeps its loaded library.
            string self = Assembly.GetEntryAssembly().Location;
            if (Environment.GetEnvironmentVariable("INT8ATTN_TEST_CHILD") == "1") return;
            var psi = new System.Diagnostics.ProcessStartInfo();
            bool mono = Type.GetType("Mono.Runtime") != null;
            bool dll = self.EndsWith(".dll", StringComparison.OrdinalIgnoreCase);
            psi.FileName = mono ? "mono" : dll ? "dotnet" : self;
            psi.Arguments = (mono || dll) ? "\"" + self + "\" --probe-missing" : "--probe-missing";
            psi.UseShellExecute = false;
            psi.RedirectStandardOutput = true;
            psi.EnvironmentVariables["INT8ATTN_LIBRARY"] = "/nonexistent/libint8attn.so";
            psi.EnvironmentVariables["INT8ATTN_TEST_CHILD"] = "1";
            using (var proc = System.Diagnostics.Process.Start(psi))
            {
                string output = proc.StandardOutput.ReadToEnd();
                proc.WaitForExit();
                Assert(output.Contains("DllNotFoundException") && output.Contains("INT8ATTN_LIBRARY"), "child said: " + output);
            }
        });

        Console.WriteLine(passed + " passed, " + failed + " failed");
        return failed == 0 ? 0 : 1;
    }

    static Program()
    {
        // Child mode for the missing-library test: try to load, print what happened, exit.
        var args = Environment.GetCommandLineArgs();
        if (args.Contains("--probe-missing"))
        {
            try { Console.WriteLine(Library.Version); }
            catch (Exception e) { Console.WriteLine(e.GetType().Name + ": " + e.Message); }
            Environment.Exit(0);
        }
    }
}
