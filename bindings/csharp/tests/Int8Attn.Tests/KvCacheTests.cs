// The K/V cache: strided appends, attention over the cache, capacity, reset, handle lifetime.
using System;
using NUnit.Framework;
using static Int8Attn.Tests.TestData;

namespace Int8Attn.Tests
{
    [TestFixture]
    public class KvCacheTests
    {
        [Test(Description = "K/V cache append and attention")]
        public void AppendAndAttention()
        {
            int hq = 4, hkv = 2, nq = 3, nk = 100, d = 64;
            float[] q2 = Data(hq * nq * d, 7, d, 0), k2 = Data(hkv * nk * d, 8, d, 0.5f), v2 = Data(hkv * nk * d, 9, d, 0.1f);
            var r = Reference(1, hq, hkv, nq, nk, d, q2, k2, v2, false, null, null);
            using (var ctx = new Context())
            using (var cache = new KvCache(ctx, new KvCacheOptions(1, hkv, 128, d) { DeviceType = DeviceType.Cpu }))
            {
                Assert.That(cache.Length, Is.EqualTo(0), "empty");
                // Two appends (60 + 40 tokens) as strided views into the full K/V: shape [1, 2, n, 64]
                // with the full tensor's strides, starting at token offset `start`.
                foreach (var chunk in new[] { new[] { 0, 60 }, new[] { 60, 40 } })
                {
                    var layout = new TensorLayout(DType.F32, new long[] { 1, hkv, chunk[1], d }, new long[] { hkv * nk * d, nk * d, d, 1 });
                    cache.Append(new ReadOnlySpan<float>(k2, chunk[0] * d, k2.Length - chunk[0] * d), layout,
                                 new ReadOnlySpan<float>(v2, chunk[0] * d, v2.Length - chunk[0] * d), layout);
                }
                Assert.That(cache.Length, Is.EqualTo(100), "length");
                var o = new float[q2.Length];
                var ql = TensorLayout.Contiguous(DType.F32, 1, hq, nq, d);
                ctx.Attention(q2, ql, cache, o, ql);
                Assert.That(MaxDiff(o, r), Is.LessThan(3e-2f), "cache error");
                var extra = new float[hkv * 40 * d];
                var el = TensorLayout.Contiguous(DType.F32, 1, hkv, 40, d);
                var e = Assert.Throws<Int8AttnException>(() => cache.Append(extra, el, extra, el));
                Assert.That(e.Status, Is.EqualTo(Status.CapacityExceeded), "capacity");
                Assert.That(cache.Length, Is.EqualTo(100), "length after the refused append");
                cache.Reset();
                Assert.That(cache.Length, Is.EqualTo(0), "reset");
            }
        }

        [Test(Description = "a cache keeps its context's native handle alive")]
        public void CacheKeepsItsContextsNativeHandleAlive()
        {
            var ctx = new Context();
            var cache = new KvCache(ctx, new KvCacheOptions(1, 1, 16, 8) { DeviceType = DeviceType.Cpu });
            ctx.Dispose();                      // the native context survives until the cache is gone
            Assert.That(cache.Length, Is.EqualTo(0), "cache still usable");
            cache.Dispose();
            Assert.That(ctx.Handle.IsClosed, "context closed");
        }
    }
}
