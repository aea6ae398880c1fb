// The loaded library, and the C# mirrors of the C ABI against the committed baseline
// tests/abi/int8attn_abi_baseline.inc and the macros of include/int8attn.h.
using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Reflection;
using System.Runtime.InteropServices;
using System.Text.RegularExpressions;
using NUnit.Framework;

namespace Int8Attn.Tests
{
    [TestFixture]
    public class AbiTests
    {
        static readonly Dictionary<string, string> StructTypes = new Dictionary<string, string>
        {
            { "int8attn_tensor_t", "Int8Attn.TensorDescriptor" },
            { "int8attn_context_params_t", "Int8Attn.ContextParamsNative" },
            { "int8attn_policy_params_t", "Int8Attn.PolicyParamsNative" },
            { "int8attn_forward_params_t", "Int8Attn.ForwardParamsNative" },
            { "int8attn_quantize_params_t", "Int8Attn.QuantizeParamsNative" },
            { "int8attn_kv_cache_params_t", "Int8Attn.KvCacheParamsNative" },
            { "int8attn_mask_params_t", "Int8Attn.MaskParamsNative" },
            { "int8attn_rotary_params_t", "Int8Attn.RotaryParamsNative" },
            { "int8attn_rms_norm_params_t", "Int8Attn.RmsNormParamsNative" },
        };

        static readonly Dictionary<string, Type> EnumPrefixes = new Dictionary<string, Type>
        {
            { "INT8ATTN_ERROR_", typeof(Status) }, { "INT8ATTN_MODE_", typeof(Mode) }, { "INT8ATTN_DTYPE_", typeof(DType) },
            { "INT8ATTN_DEVICE_", typeof(DeviceType) }, { "INT8ATTN_GRANULARITY_", typeof(Granularity) },
            { "INT8ATTN_FLAG_", typeof(AttentionFlags) }, { "INT8ATTN_FEATURE_", typeof(Features) },
            { "INT8ATTN_ROTARY_", typeof(RotaryArithmetic) },
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

        [Test(Description = "library loads and reports its version")]
        public void LibraryLoadsAndReportsItsVersion()
        {
            Assert.That(Library.LoadedAbiVersion, Is.EqualTo(Library.AbiVersion), "ABI version");
            Assert.That(Library.Version, Is.EqualTo(Library.BindingsVersion), "version string");
            Assert.That(Library.VersionNumber, Is.EqualTo(100), "version number");
            Assert.That(Library.Features & Features.Cpu, Is.Not.EqualTo((Features)0), "CPU feature");
            Assert.That(Library.DeviceCount, Is.GreaterThanOrEqualTo(0), "device count");
            Assert.That(Library.StatusString(Status.BadShape), Is.Not.Empty, "status string");
        }

        [Test(Description = "struct layouts and enum values match the ABI baseline")]
        public void StructLayoutsAndEnumValuesMatchTheAbiBaseline()
        {
            CheckBaseline(TestData.BaselinePath());
        }

        [Test(Description = "constants match the macros of include/int8attn.h")]
        public void ConstantsMatchTheHeaderMacros()
        {
            // The baseline lives in tests/abi/ of the source tree, next to include/.
            string baseline = TestData.BaselinePath();
            string header = Path.GetFullPath(Path.Combine(Path.GetDirectoryName(Path.GetFullPath(baseline)), "..", "..", "include", "int8attn.h"));
            CheckHeaderMacros(header);
            Assert.That(TensorDescriptor.MaxRank, Is.EqualTo(Constants.MaxRank), "TensorDescriptor.MaxRank");
            var f = new ForwardOptions(); var mo = new MaskOptions();
            Assert.That(f.MaskQBlock == Constants.MaskQBlockDefault && f.MaskKBlock == Constants.MaskKBlockDefault,
                        "ForwardOptions mask blocks " + f.MaskQBlock + "x" + f.MaskKBlock);
            Assert.That(mo.QBlock == Constants.MaskQBlockDefault && mo.KBlock == Constants.MaskKBlockDefault,
                        "MaskOptions blocks " + mo.QBlock + "x" + mo.KBlock);
        }

        // Every integer #define of include/int8attn.h has a C# copy with the same value, and no copy
        // names a macro the header lacks.
        static void CheckHeaderMacros(string header)
        {
            var text = Regex.Replace(File.ReadAllText(header), @"/\*.*?\*/|//[^\n]*", " ", RegexOptions.Singleline);
            var found = new Dictionary<string, long>();
            foreach (Match m in Regex.Matches(text, @"^[ \t]*#[ \t]*define[ \t]+(INT8ATTN_\w+)[ \t]+(\d+)[uU]?[ \t]*\r?$", RegexOptions.Multiline))
                found[m.Groups[1].Value] = long.Parse(m.Groups[2].Value);
            Assert.That(found.ContainsKey("INT8ATTN_MAX_RANK") && found.Count >= Macros.Count, "parsed " + found.Count + " macros of " + header);
            foreach (var kv in found)
            {
                if (MacrosNotMirrored.Contains(kv.Key)) continue;
                Assert.That(Macros.ContainsKey(kv.Key), kv.Key + " = " + kv.Value + " has no C# copy (Constants in Native.cs)");
                Assert.That(Macros[kv.Key], Is.EqualTo(kv.Value), "C# copy of " + kv.Key + " (the header's value is expected)");
            }
            foreach (var name in Macros.Keys)
                Assert.That(found.ContainsKey(name), "C# copies " + name + ", which the header does not define");
        }

        static void CheckBaseline(string path)
        {
            Assembly asm = typeof(Context).Assembly;
            var lines = File.ReadAllLines(path);
            var seenFields = new Dictionary<string, int>();
            var seenEnum = new HashSet<string>();
            int structs = 0, fields = 0, consts = 0, functions = 0;
            var natives = asm.GetType("Int8Attn.NativeMethods+Imports", true)
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
                    Assert.That(Marshal.SizeOf(t), Is.EqualTo(int.Parse(m.Groups[2].Value)), "Marshal.SizeOf(" + t.Name + ") vs the baseline");
                    structs++;
                }
                else if ((m = Regex.Match(line, @"^INT8ATTN_ABI_FIELD\((\w+), (\w+), (\d+), (\d+)\)$")).Success)
                {
                    Type t = asm.GetType(StructTypes[m.Groups[1].Value], true);
                    string cname = m.Groups[2].Value;
                    FieldInfo fi = t.GetFields(BindingFlags.Instance | BindingFlags.Public | BindingFlags.NonPublic)
                        .FirstOrDefault(x => Norm(x.Name) == Norm(cname));
                    Assert.That(fi, Is.Not.Null, t.Name + " has no field for C field " + cname);
                    string fname = fi.Name;
                    long off = (long)Marshal.OffsetOf(t, fname);
                    Assert.That(off, Is.EqualTo(long.Parse(m.Groups[3].Value)), t.Name + "." + fname + " offset vs the baseline");
                    int size = Marshal.SizeOf(fi.FieldType);
                    Assert.That(size, Is.EqualTo(int.Parse(m.Groups[4].Value)), t.Name + "." + fname + " size vs the baseline");
                    int n; seenFields.TryGetValue(t.FullName, out n); seenFields[t.FullName] = n + 1;
                    fields++;
                }
                else if ((m = Regex.Match(line, @"^INT8ATTN_ABI_CONST\((\w+), (-?\d+)\)$")).Success)
                {
                    string name = m.Groups[1].Value; long value = long.Parse(m.Groups[2].Value);
                    consts++;
                    if (name == "INT8ATTN_OK") { Assert.That((long)(int)Status.Ok, Is.EqualTo(value), "Status.Ok"); continue; }
                    if (Macros.ContainsKey(name)) { Assert.That(Macros[name], Is.EqualTo(value), name + " vs the baseline"); continue; }
                    var prefix = EnumPrefixes.Keys.FirstOrDefault(p => name.StartsWith(p));
                    Assert.That(prefix, Is.Not.Null, "no C# enum for " + name);
                    Type et = EnumPrefixes[prefix];
                    string member = Enum.GetNames(et).FirstOrDefault(x => Norm(x) == Norm(name.Substring(prefix.Length)));
                    Assert.That(member, Is.Not.Null, et.Name + " lacks a member for " + name);
                    long actual = Convert.ToInt64(Enum.Parse(et, member));
                    Assert.That(actual, Is.EqualTo(value), et.Name + "." + member + " vs the baseline");
                    seenEnum.Add(et.Name + "." + member);
                }
                else if ((m = Regex.Match(line, @"^INT8ATTN_ABI_VERSION_ENTRY\((\d+)\)$")).Success)
                {
                    Assert.That(Library.AbiVersion, Is.EqualTo(uint.Parse(m.Groups[1].Value)), "Library.AbiVersion vs the baseline");
                }
                else if ((m = Regex.Match(line, @"^INT8ATTN_ABI_FUNCTION\((\w+)\)$")).Success)
                {
                    Assert.That(natives, Has.Member(m.Groups[1].Value), "no P/Invoke declaration for " + m.Groups[1].Value);
                    functions++;
                }
            }
            Assert.That(structs == 9 && fields > 50 && consts > 40 && functions == 38,
                "parsed the baseline (" + structs + " structs, " + fields + " fields, " + consts + " consts, " + functions + " functions)");
            // Every C# mirror field is in the baseline (no extra or missing fields).
            foreach (var kv in StructTypes)
            {
                Type t = asm.GetType(kv.Value, true);
                int declared = t.GetFields(BindingFlags.Instance | BindingFlags.Public | BindingFlags.NonPublic).Length;
                Assert.That(seenFields.ContainsKey(t.FullName), t.Name + " has no field in the baseline");
                Assert.That(seenFields[t.FullName], Is.EqualTo(declared), "fields of " + t.Name + " in the baseline vs declared in C#");
            }
            // Every C# enum member mirrors a baseline enumerator.
            foreach (Type et in EnumPrefixes.Values)
                foreach (string member in Enum.GetNames(et))
                {
                    if (member == "None" || member == "AbiMismatch" || (et == typeof(Status) && member == "Ok")) continue;
                    Assert.That(seenEnum.Contains(et.Name + "." + member), et.Name + "." + member + " is not in the ABI baseline");
                }
        }
    }
}
