// One context per thread gives identical results; overlapping calls on one context are refused.
using System;
using System.Linq;
using System.Threading;
using NUnit.Framework;
using static Int8Attn.Tests.TestData;

namespace Int8Attn.Tests
{
    [TestFixture]
    public class ThreadingTests
    {
        [Test(Description = "one context per thread; concurrent use of one context is refused")]
        public void OneContextPerThreadAndConcurrentUseIsRefused()
        {
            using (var p = new Policy(8))
            {
                float[] expected;
                using (var ctx = new Context()) expected = Attn(ctx, B, H, H, N, N, D, Q, K, V, new ForwardOptions { Policy = p, Timestep = 3 });
                var results = new float[2][];
                var threads = Enumerable.Range(0, 2).Select(i => new Thread(() =>
                {
                    using (var ctx = new Context())
                        results[i] = Attn(ctx, B, H, H, N, N, D, Q, K, V, new ForwardOptions { Policy = p, Timestep = 3 });
                })).ToList();
                threads.ForEach(t => t.Start());
                threads.ForEach(t => t.Join());
                Assert.That(results.All(r => r != null && MaxDiff(r, expected) == 0f), "threads agree");
            }
            // Two threads hammering one context: overlapping calls are refused (InvalidOperationException), none may crash or fail otherwise.
            using (var ctx = new Context(new ContextOptions { NumThreads = 1 }))
            {
                int refused = 0, errors = 0;
                string firstError = null;
                var big = Data(1 * 2 * 512 * 64, 15, 64, 0);
                var threads = Enumerable.Range(0, 2).Select(i => new Thread(() =>
                {
                    for (int it = 0; it < 20; it++)
                    {
                        try { Attn(ctx, 1, 2, 2, 512, 512, 64, big, big, big, null); }
                        catch (InvalidOperationException) { Interlocked.Increment(ref refused); }
                        catch (Exception e) { if (Interlocked.Increment(ref errors) == 1) firstError = e.ToString(); }
                    }
                })).ToList();
                threads.ForEach(t => t.Start());
                threads.ForEach(t => t.Join());
                Assert.That(errors, Is.EqualTo(0), "no other errors; the first: " + firstError);
                Console.WriteLine("(" + refused + " concurrent calls refused)");
            }
        }
    }
}
