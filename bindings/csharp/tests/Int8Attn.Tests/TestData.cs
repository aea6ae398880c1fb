// Shared inputs and helpers of the NUnit tests: deterministic data, a float64 reference attention
// and the path of the committed ABI baseline.
using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using Int8Attn;
using NUnit.Framework;

namespace Int8Attn.Tests
{
    static class TestData
    {
        // The default problem: [B, H, N, D] = [2, 2, 70, 40], self-attention.
        public const int B = 2, H = 2, N = 70, D = 40;
        public static readonly float[] Q = Data(B * H * N * D, 1, D, 0f);
        public static readonly float[] K = Data(B * H * N * D, 2, D, 0.5f);
        public static readonly float[] V = Data(B * H * N * D, 3, D, 0.25f);
        // K and V with more than 512 keys, for tests of the modes' differences: on at most 512
        // keys (of D = 40 channels) every mode runs EXACT. Q stays the default problem's
        // [B, H, N, D].
        public const int NK = 520;
        public static readonly float[] KM = Data(B * H * NK * D, 2, D, 0.5f);
        public static readonly float[] VM = Data(B * H * NK * D, 3, D, 0.25f);

        public static float[] Data(int len, ulong seed, int d, float bias)
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

        public static float[] Reference(int b, int hq, int hkv, int nq, int nk, int d, float[] q, float[] k, float[] v,
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

        public static float MaxDiff(float[] a, float[] b)
        {
            Assert.That(a.Length, Is.EqualTo(b.Length), "lengths match");
            float m = 0;
            for (int i = 0; i < a.Length; i++) m = Math.Max(m, Math.Abs(a[i] - b[i]));
            return m;
        }

        public static float[] Attn(Context ctx, int b, int hq, int hkv, int nq, int nk, int d, float[] q, float[] k, float[] v, ForwardOptions opt)
        {
            var o = new float[q.Length];
            var ql = TensorLayout.Contiguous(DType.F32, b, hq, nq, d);
            var kl = TensorLayout.Contiguous(DType.F32, b, hkv, nk, d);
            ctx.Attention(q, ql, k, kl, v, kl, o, ql, opt);
            return o;
        }

        /// <summary>tests/abi/int8attn_abi_baseline.inc: $INT8ATTN_ABI_BASELINE, else found above the
        /// current directory or the test assembly.</summary>
        public static string BaselinePath()
        {
            string env = Environment.GetEnvironmentVariable("INT8ATTN_ABI_BASELINE");
            if (!string.IsNullOrEmpty(env))
            {
                Assert.That(File.Exists(env), "INT8ATTN_ABI_BASELINE=" + env + " does not exist");
                return env;
            }
            var starts = new[] { Environment.CurrentDirectory, AppDomain.CurrentDomain.BaseDirectory,
                                 Path.GetDirectoryName(typeof(TestData).Assembly.Location) };
            foreach (var start in starts)
                for (var dir = start; !string.IsNullOrEmpty(dir); dir = Path.GetDirectoryName(dir))
                {
                    string p = Path.Combine(dir, "tests", "abi", "int8attn_abi_baseline.inc");
                    if (File.Exists(p)) return p;
                }
            Assert.Fail("tests/abi/int8attn_abi_baseline.inc not found: set INT8ATTN_ABI_BASELINE to its path");
            return null;
        }
    }
}
