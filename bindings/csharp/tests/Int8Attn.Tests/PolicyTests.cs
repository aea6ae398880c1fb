// Timestep policies: defaults, explicit modes, scale multipliers, sigma edges, and forward calls
// that take their mode from the policy.
using NUnit.Framework;
using static Int8Attn.Tests.TestData;

namespace Int8Attn.Tests
{
    [TestFixture]
    public class PolicyTests
    {
        [Test(Description = "timestep policy")]
        public void TimestepPolicy()
        {
            using (var p = new Policy(10))
            {
                Assert.That(p.NumTimesteps, Is.EqualTo(10), "T");
                Assert.That(p.GetMode(0) == Mode.Exact && p.GetMode(5) == Mode.Fast && p.GetMode(9) == Mode.Exact, "default edges");
                p.SetMode(5, Mode.Balanced);
                Assert.That(p.GetMode(5), Is.EqualTo(Mode.Balanced), "set_mode");
                var e = Assert.Throws<Int8AttnException>(() => p.GetMode(10));
                Assert.That(e.Status, Is.EqualTo(Status.BadValue), "out of range");
            }
            var mults = new[] { 1f, 0.9f, 0.8f, 0.7f };
            using (var p = new Policy(new PolicyOptions { NumTimesteps = 4, DefaultMode = Mode.Balanced, NumFirstEdge = 0, ScaleMultipliers = mults }))
            {
                Mode m; float s;
                p.Get(2, out m, out s);
                Assert.That(m, Is.EqualTo(Mode.Balanced), "mode of step 2");
                Assert.That(s, Is.EqualTo(0.8f), "multiplier");
                Assert.That(p.GetMode(3), Is.EqualTo(Mode.Exact), "last edge");
            }
            using (var p = new Policy(new PolicyOptions { Sigmas = new[] { 14.6f, 8f, 3f, 1f, 0.3f, 0.03f }, NumFirstEdge = 0, NumLastEdge = 0, SigmaEdgeAbove = 10f, SigmaEdgeBelow = 0.1f }))
            {
                Assert.That(p.NumTimesteps, Is.EqualTo(6), "T from sigmas");
                Assert.That(p.GetMode(0) == Mode.Exact && p.GetMode(2) == Mode.Fast && p.GetMode(5) == Mode.Exact, "sigma edges");
            }
            var pe = Assert.Throws<Int8AttnException>(() => new Policy(0));
            Assert.That(pe.Status, Is.EqualTo(Status.BadValue), "zero steps");
        }

        [Test(Description = "forward with a policy uses the step's mode")]
        public void ForwardWithPolicyUsesTheStepsMode()
        {
            using (var ctx = new Context())
            using (var p = new Policy(20))
            {
                // More than 512 keys (KM, VM): with fewer every mode runs EXACT.
                var exact = Attn(ctx, B, H, H, N, NK, D, Q, KM, VM, new ForwardOptions { Mode = Mode.Exact });
                var fast = Attn(ctx, B, H, H, N, NK, D, Q, KM, VM, new ForwardOptions { Mode = Mode.Fast });
                var at0 = Attn(ctx, B, H, H, N, NK, D, Q, KM, VM, new ForwardOptions { Policy = p, Timestep = 0 });
                var at7 = Attn(ctx, B, H, H, N, NK, D, Q, KM, VM, new ForwardOptions { Policy = p, Timestep = 7 });
                Assert.That(MaxDiff(exact, fast), Is.GreaterThan(0f), "the modes are distinguishable");
                Assert.That(MaxDiff(at0, exact), Is.EqualTo(0f), "step 0 (edge) runs EXACT");
                Assert.That(MaxDiff(at7, fast), Is.EqualTo(0f), "step 7 runs FAST");
            }
        }
    }
}
