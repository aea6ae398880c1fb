// Attention on the CPU backend against a float64 reference: modes, causal/GQA/lengths/LSE, layouts,
// fp16, the descriptor API, errors and block masks.
using System;
using System.Linq;
using System.Runtime.InteropServices;
using NUnit.Framework;
using static Int8Attn.Tests.TestData;

namespace Int8Attn.Tests
{
    [TestFixture]
    public class AttentionTests
    {
        [Test(Description = "EXACT matches a float64 reference")]
        public void ExactMatchesFloat64Reference()
        {
            using (var ctx = new Context())
            {
                var o = Attn(ctx, B, H, H, N, N, D, Q, K, V, new ForwardOptions { Mode = Mode.Exact });
                var r = Reference(B, H, H, N, N, D, Q, K, V, false, null, null);
                Assert.That(MaxDiff(o, r), Is.LessThan(1e-4f), "EXACT error");
            }
        }

        [Test(Description = "BALANCED and FAST are close to the reference")]
        public void BalancedAndFastAreCloseToReference()
        {
            using (var ctx = new Context())
            {
                // More than 512 keys (KM, VM): with fewer every mode runs EXACT.
                var r = Reference(B, H, H, N, NK, D, Q, KM, VM, false, null, null);
                var ob = Attn(ctx, B, H, H, N, NK, D, Q, KM, VM, new ForwardOptions { Mode = Mode.Balanced });
                var of = Attn(ctx, B, H, H, N, NK, D, Q, KM, VM, new ForwardOptions { Mode = Mode.Fast });
                var od = Attn(ctx, B, H, H, N, NK, D, Q, KM, VM, null);
                Assert.That(MaxDiff(ob, r), Is.LessThan(2e-2f), "BALANCED error");
                Assert.That(MaxDiff(of, r), Is.LessThan(6e-2f), "FAST error");
                Assert.That(MaxDiff(od, ob), Is.EqualTo(0f), "default mode is BALANCED");
            }
        }

        [Test(Description = "causal, GQA, valid lengths and LSE")]
        public void CausalGqaValidLengthsAndLse()
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
                Assert.That(MaxDiff(o, r), Is.LessThan(1e-4f), "O error");
                Assert.That(MaxDiff(lse, lseRef), Is.LessThan(1e-4f), "LSE error");
            }
        }

        [Test(Description = "NHD strides give the HND result")]
        public void NhdStridesGiveTheHndResult()
        {
            using (var ctx = new Context())
            {
                var o = Attn(ctx, B, H, H, N, N, D, Q, K, V, new ForwardOptions { Mode = Mode.Exact });
                Func<float[], float[]> toNhd = x =>
                {
                    var y = new float[x.Length];
                    for (int b = 0; b < B; b++) for (int h = 0; h < H; h++) for (int n = 0; n < N; n++) for (int c = 0; c < D; c++)
                        y[((b * N + n) * H + h) * D + c] = x[((b * H + h) * N + n) * D + c];
                    return y;
                };
                var nhd = TensorLayout.Nhd(DType.F32, B, H, N, D);
                var on = new float[o.Length];
                ctx.Attention(toNhd(Q), nhd, toNhd(K), nhd, toNhd(V), nhd, on, nhd, new ForwardOptions { Mode = Mode.Exact });
                Assert.That(MaxDiff(on, toNhd(o)), Is.LessThan(1e-6f), "NHD vs HND");
            }
        }

        [Test(Description = "fp16 buffers (ushort bits)")]
        public void Fp16Buffers()
        {
            Func<float[], ushort[]> h = x => x.Select(HalfBits.FromSingle).ToArray();
            Func<ushort[], float[]> f = x => x.Select(HalfBits.ToSingle).ToArray();
            ushort[] qh = h(Q), kh = h(K), vh = h(V), oh = new ushort[Q.Length];
            var l = TensorLayout.Contiguous(DType.F16, B, H, N, D);
            using (var ctx = new Context())
                ctx.Attention(qh, l, kh, l, vh, l, oh, l, new ForwardOptions { Mode = Mode.Exact });
            var r = Reference(B, H, H, N, N, D, f(qh), f(kh), f(vh), false, null, null);
            Assert.That(MaxDiff(f(oh), r), Is.LessThan(2e-3f), "fp16 error");
            Assert.That(HalfBits.FromSingle(1.0f) == 0x3c00 && HalfBits.ToSingle(0x3c00) == 1.0f, "half conversion");
            Assert.That(HalfBits.BF16FromSingle(1.0f) == 0x3f80 && HalfBits.BF16ToSingle(0x3f80) == 1.0f, "bf16 conversion");
        }

        [Test(Description = "errors carry the status and the library's message, and write nothing")]
        public void ErrorsCarryStatusAndMessageAndWriteNothing()
        {
            using (var ctx = new Context())
            {
                var x = Enumerable.Repeat(0.5f, 16 * 12).ToArray();
                var o = Enumerable.Repeat(7f, 16 * 12).ToArray();
                var l = TensorLayout.Contiguous(DType.F32, 1, 1, 16, 12);
                var e = Assert.Throws<Int8AttnException>(() => ctx.Attention(x, l, x, l, x, l, o, l));
                Assert.That(e.Status, Is.EqualTo(Status.UnsupportedHeadDim), "status");
                Assert.That(e.NativeMessage, Contains.Substring("12"), "message names the value");
                Assert.That(e.Message, Contains.Substring("202"), "Message has the code");
                Assert.That(o.All(t => t == 7f), "output untouched");

                var a = new float[16 * 8];
                var la = TensorLayout.Contiguous(DType.F32, 1, 1, 16, 8);
                e = Assert.Throws<Int8AttnException>(() => ctx.Attention(a, la, a, la, a, la, new float[16 * 8], la, new ForwardOptions { SmScale = float.NaN }));
                Assert.That(e.Status, Is.EqualTo(Status.BadValue), "NaN scale");
                // Too-short buffers are caught before the call.
                e = Assert.Throws<Int8AttnException>(() => ctx.Attention(a, TensorLayout.Contiguous(DType.F32, 1, 1, 17, 8), a, la, a, la, new float[17 * 8], TensorLayout.Contiguous(DType.F32, 1, 1, 17, 8)));
                Assert.That(e.Status, Is.EqualTo(Status.BadShape), "short buffer");
                // Wrong element type for the layout.
                e = Assert.Throws<Int8AttnException>(() => ctx.Attention(a, TensorLayout.Contiguous(DType.F16, 1, 1, 16, 8), a, la, a, la, new float[16 * 8], la));
                Assert.That(e.Status, Is.EqualTo(Status.BadDtype), "dtype");
                var ce = Assert.Throws<Int8AttnException>(() => new Context(new ContextOptions { NumThreads = -1 }));
                Assert.That(ce.Status, Is.EqualTo(Status.BadValue), "negative threads");
            }
        }

        [Test(Description = "descriptor API and workspace queries")]
        public void DescriptorApiAndWorkspaceQueries()
        {
            using (var ctx = new Context(new ContextOptions { NumThreads = 1 }))
            {
                var qh = GCHandle.Alloc(Q, GCHandleType.Pinned); var kh = GCHandle.Alloc(K, GCHandleType.Pinned);
                var vh = GCHandle.Alloc(V, GCHandleType.Pinned); var o = new float[Q.Length]; var oh = GCHandle.Alloc(o, GCHandleType.Pinned);
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
                        var o2 = Attn(ctx2, B, H, H, N, N, D, Q, K, V, new ForwardOptions { Mode = Mode.Balanced });
                        Assert.That(MaxDiff(o, o2), Is.EqualTo(0f), "1 thread and all threads give the same bits");
                    }
                    // CUDA descriptors without CUDA: a clean error, not a crash.
                    if ((Library.Features & Features.Cuda) == 0)
                    {
                        var cd = TensorDescriptor.Create(new IntPtr(0x1000), DeviceType.Cuda, 0, DType.F16, shape);
                        var e = Assert.Throws<Int8AttnException>(() => ctx.Attention(cd, cd, cd, cd));
                        Assert.That(e.Status == Status.BackendUnavailable || e.Status == Status.BadDevice || e.Status == Status.Aliasing,
                                    "CUDA without CUDA: " + e.Status + " " + e.NativeMessage);
                    }
                }
                finally { qh.Free(); kh.Free(); vh.Free(); oh.Free(); }
            }
        }

        [Test(Description = "block mask prediction and use")]
        public void BlockMaskPredictionAndUse()
        {
            int hq = 2, nq = 128, nk = 256, d = 64;
            float[] q2 = Data(hq * nq * d, 12, d, 0), k2 = Data(hq * nk * d, 13, d, 0.5f), v2 = Data(hq * nk * d, 14, d, 0.1f);
            var mask = new byte[hq * 2 * 4];
            var ml = TensorLayout.Contiguous(DType.U8, 1, hq, 2, 4);
            using (var ctx = new Context())
            {
                ctx.PredictBlockMask(q2, TensorLayout.Contiguous(DType.F32, 1, hq, nq, d), k2, TensorLayout.Contiguous(DType.F32, 1, hq, nk, d),
                                     mask, ml, new MaskOptions { QBlock = 64, KBlock = 64, KeepRatio = 1f });
                Assert.That(mask.All(m => m != 0), "keep_ratio 1 keeps all blocks");
                var dense = Attn(ctx, 1, hq, hq, nq, nk, d, q2, k2, v2, new ForwardOptions { Mode = Mode.Exact });
                var masked = Attn(ctx, 1, hq, hq, nq, nk, d, q2, k2, v2,
                                  new ForwardOptions { Mode = Mode.Exact, BlockMask = mask, BlockMaskLayout = ml, MaskQBlock = 64, MaskKBlock = 64 });
                Assert.That(MaxDiff(dense, masked), Is.EqualTo(0f), "all-keep mask equals dense");
            }
        }

        static int Bits(float f) { return BitConverter.ToInt32(BitConverter.GetBytes(f), 0); }

        [Test(Description = "rotary is the float32 formula, bit for bit")]
        public void RotaryIsTheFloat32Formula()
        {
            int h = 2, n = 5, d = 8;
            var x = Data(h * n * d, 12, d, 0f);
            var cos = Data(n * d, 13, d, 0f); var sin = Data(n * d, 14, d, 0f);
            var output = new float[x.Length];
            using (var ctx = new Context())
            {
                var layout = TensorLayout.Contiguous(DType.F32, 1, h, n, d);
                ctx.Rotary(x, layout, cos, sin, output, layout);
                for (int row = 0; row < h * n; row++)
                {
                    int t = (row % n) * d;
                    for (int i = 0; i < d; i += 2)
                    {
                        float x0 = x[row * d + i], x1 = x[row * d + i + 1];
                        float y0 = (float)((float)(x0 * cos[t + i]) - (float)(x1 * sin[t + i]));
                        float y1 = (float)((float)(x1 * cos[t + i + 1]) + (float)(x0 * sin[t + i + 1]));
                        if (Bits(output[row * d + i]) != Bits(y0) || Bits(output[row * d + i + 1]) != Bits(y1))
                            Assert.Fail("row " + row + ", pair " + i + ": " + output[row * d + i] + ", " + output[row * d + i + 1] +
                                        " instead of " + y0 + ", " + y1);
                    }
                }
                // The complex product's arithmetic: one fused multiply-add per part (in double: the
                // product is exact, and the sum's rounding cannot move these float results).
                ctx.Rotary(x, layout, cos, sin, output, layout, RotaryArithmetic.ComplexFma);
                for (int row = 0; row < h * n; row++)
                {
                    int t = (row % n) * d;
                    for (int i = 0; i < d; i += 2)
                    {
                        float x0 = x[row * d + i], x1 = x[row * d + i + 1];
                        float y0 = (float)((double)x0 * cos[t + i] - (float)(x1 * sin[t + i]));
                        float y1 = (float)((double)x0 * sin[t + i + 1] + (float)(x1 * cos[t + i + 1]));
                        if (Bits(output[row * d + i]) != Bits(y0) || Bits(output[row * d + i + 1]) != Bits(y1))
                            Assert.Fail("complex, row " + row + ", pair " + i);
                    }
                }
                var e = Assert.Throws<Int8AttnException>(() => ctx.Rotary(x, TensorLayout.Contiguous(DType.F32, 1, h, n * d / 7, 7),
                                                                           cos, sin, output, TensorLayout.Contiguous(DType.F32, 1, h, n * d / 7, 7)));
                Assert.That(e.Status, Is.EqualTo(Status.BadShape), "odd head dim");
            }
        }

        // float32 reference of rms_norm over contiguous rows of d: x / sqrt(mean(x²) + eps) · w.
        static float[] RmsNormReference(float[] x, int d, float[] w, float eps)
        {
            var y = new float[x.Length];
            for (int row = 0; row < x.Length / d; row++)
            {
                float ss = 0f;
                for (int c = 0; c < d; c++) ss = (float)(ss + (float)(x[row * d + c] * x[row * d + c]));
                float r = (float)(1f / (float)Math.Sqrt((float)(ss / d) + eps));
                for (int c = 0; c < d; c++)
                    y[row * d + c] = w == null ? (float)(x[row * d + c] * r) : (float)((float)(x[row * d + c] * r) * w[c]);
            }
            return y;
        }

        static void AssertRelClose(float[] got, float[] want, float tol, string what)
        {
            for (int i = 0; i < want.Length; i++)
                if (!(Math.Abs(got[i] - want[i]) <= tol * Math.Abs(want[i])))
                    Assert.Fail(what + ": element " + i + ": " + got[i] + " instead of " + want[i]);
        }

        [Test(Description = "rms_norm is the float32 formula, with and without a weight and in place")]
        public void RmsNormIsTheFloat32Formula()
        {
            int h = 2, n = 3, d = 8;
            var x = Data(h * n * d, 14, d, 0.5f);
            var w = Data(d, 15, d, 1f);
            var layout = TensorLayout.Contiguous(DType.F32, 1, h, n, d);
            var want = RmsNormReference(x, d, w, 1e-6f);
            using (var ctx = new Context())
            {
                var output = new float[x.Length];
                ctx.RmsNorm(x, layout, w, output, layout);
                AssertRelClose(output, want, 1e-6f, "weight, default eps");

                ctx.RmsNorm(x, layout, null, output, layout, eps: 0.5f);
                AssertRelClose(output, RmsNormReference(x, d, null, 0.5f), 1e-6f, "no weight, eps 0.5");

                // In place, through the span overload (the same buffer as x and output) ...
                var y = (float[])x.Clone();
                ctx.RmsNorm(y, layout, w, y, layout);
                AssertRelClose(y, want, 1e-6f, "in place");

                // ... and through descriptors, without a weight.
                y = (float[])x.Clone();
                var yh = GCHandle.Alloc(y, GCHandleType.Pinned);
                try
                {
                    var yd = TensorDescriptor.Create(yh.AddrOfPinnedObject(), DeviceType.Cpu, 0, DType.F32, new long[] { 1, h, n, d });
                    ctx.RmsNorm(yd, null, yd);
                }
                finally { yh.Free(); }
                AssertRelClose(y, RmsNormReference(x, d, null, 1e-6f), 1e-6f, "in place, descriptors");

                // A weight of the wrong length is the library's error, naming the weight; nothing is written.
                var o7 = Enumerable.Repeat(7f, x.Length).ToArray();
                var e = Assert.Throws<Int8AttnException>(() => ctx.RmsNorm(x, layout, new float[d - 1], o7, layout));
                Assert.That(e.Status, Is.EqualTo(Status.BadShape), "short weight");
                Assert.That(e.NativeMessage, Contains.Substring("weight"), "message names the weight");
                Assert.That(o7.All(t => t == 7f), "output untouched");
                e = Assert.Throws<Int8AttnException>(() => ctx.RmsNorm(x, layout, w, o7, layout, eps: -1f));
                Assert.That(e.Status, Is.EqualTo(Status.InvalidArgument), "negative eps");
            }
        }

        [Test(Description = "quantize round-trips within half a step")]
        public void QuantizeRoundTripsWithinHalfAStep()
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
                    if (!(Math.Abs(back - x[idx]) <= 0.5f * s * 1.001f + 1e-6f))   // Assert per element is slow
                        Assert.Fail("element " + idx + ": " + x[idx] + " came back as " + back + " (step " + s + ")");
                }
                var e = Assert.Throws<Int8AttnException>(() => ctx.Quantize(x, TensorLayout.Contiguous(DType.F32, 1, h, n, d), xi, scales, Span<float>.Empty, new QuantizeOptions { Smooth = true }));
                Assert.That((int)e.Status, Is.InRange(100, 199), "smooth without mean: " + e.Status);
            }
        }
    }
}
