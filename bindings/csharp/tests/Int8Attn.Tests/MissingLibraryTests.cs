// A missing native library gives an actionable DllNotFoundException. Checked in a child process
// (Int8Attn.MissingLibraryProbe, built next to this assembly) so that this process keeps its
// loaded library.
using System;
using System.Diagnostics;
using System.IO;
using NUnit.Framework;

namespace Int8Attn.Tests
{
    [TestFixture]
    public class MissingLibraryTests
    {
        const string ProbeName = "Int8Attn.MissingLibraryProbe";

        // $INT8ATTN_TEST_PROBE, else Int8Attn.MissingLibraryProbe.exe (Mono, .NET Framework) or .dll
        // (.NET) next to the test assembly.
        static string FindProbe()
        {
            string env = Environment.GetEnvironmentVariable("INT8ATTN_TEST_PROBE");
            if (!string.IsNullOrEmpty(env)) return env;
            foreach (var dir in new[] { Path.GetDirectoryName(typeof(MissingLibraryTests).Assembly.Location), AppDomain.CurrentDomain.BaseDirectory })
                foreach (var ext in new[] { ".exe", ".dll" })
                {
                    string p = Path.Combine(dir, ProbeName + ext);
                    if (File.Exists(p)) return p;
                }
            return null;
        }

        [Test(Description = "a missing library gives an actionable DllNotFoundException")]
        public void MissingLibraryGivesActionableDllNotFoundException()
        {
            string probe = FindProbe();
            Assert.That(probe != null && File.Exists(probe),
                        ProbeName + " not found next to the tests (or at $INT8ATTN_TEST_PROBE): build it (.ci/steps/50-csharp.sh does)");
            var psi = new ProcessStartInfo();
            bool mono = Type.GetType("Mono.Runtime") != null;
            bool dll = probe.EndsWith(".dll", StringComparison.OrdinalIgnoreCase);
            psi.FileName = mono ? "mono" : dll ? "dotnet" : probe;
            psi.Arguments = (mono || dll) ? "\"" + probe + "\"" : "";
            psi.UseShellExecute = false;
            psi.RedirectStandardOutput = true;
            psi.RedirectStandardError = true;
            psi.EnvironmentVariables["INT8ATTN_LIBRARY"] = "/nonexistent/libint8attn.so";
            using (var proc = Process.Start(psi))
            {
                var stderr = proc.StandardError.ReadToEndAsync();
                string output = proc.StandardOutput.ReadToEnd();
                if (!proc.WaitForExit(120000))
                {
                    proc.Kill();
                    Assert.Fail(probe + " did not finish in 120 s; it printed: " + output);
                }
                string said = "the probe printed: " + output + " (stderr: " + stderr.Result + ")";
                Assert.That(proc.ExitCode, Is.EqualTo(0), "exit status (0: DllNotFoundException; 3: the library loaded); " + said);
                Assert.That(output, Contains.Substring("DllNotFoundException"), said);
                Assert.That(output, Contains.Substring("INT8ATTN_LIBRARY"), said);
                Assert.That(output, Contains.Substring("/nonexistent/libint8attn.so"), said);
            }
        }
    }
}
