using System;
using System.IO;
using System.Reflection;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Text;

namespace Int8Attn
{
    /// <summary>
    /// Locates and checks the native library before the first call.
    /// <list type="bullet">
    /// <item>INT8ATTN_LIBRARY=/full/path/to/libint8attn.so overrides everything.</item>
    /// <item>.NET Core 3+ / .NET 5+: a DllImport resolver (NativeLibrary.SetDllImportResolver,
    /// found by reflection so that this netstandard2.0 assembly also runs elsewhere) loads the
    /// override, else the versioned soname libint8attn.so.1, else falls back to the default
    /// probing (application directory, runtimes/&lt;rid&gt;/native, LD_LIBRARY_PATH, PATH).</item>
    /// <item>Mono: Int8Attn.dll.config maps "int8attn" to libint8attn.so.1 (found through
    /// LD_LIBRARY_PATH or the loader cache); with INT8ATTN_LIBRARY the file is dlopen'ed first
    /// (RTLD_GLOBAL), so the soname lookup finds the already loaded library.</item>
    /// </list>
    /// If the library cannot be loaded, a <see cref="DllNotFoundException"/> says which variable to
    /// set. The loaded library's ABI version must equal <see cref="Library.AbiVersion"/>.
    /// </summary>
    public static class NativeLibraryLoader
    {
        /// <summary>The DllImport name.</summary>
        public const string LibraryName = "int8attn";
        /// <summary>Environment variable that names the library file to load.</summary>
        public const string LibraryEnvVar = "INT8ATTN_LIBRARY";

        static readonly object Gate = new object();
        static volatile bool loaded;
        static bool resolverInstalled;

        /// <summary>The file the resolver loaded (null when the runtime's probing did it).</summary>
        public static string LoadedFrom { get; private set; }

        /// <summary>Load the library and check its ABI (once). Every public entry point calls this.</summary>
        public static void EnsureLoaded()
        {
            if (loaded) return;
            lock (Gate)
            {
                if (loaded) return;
                string overridePath = Environment.GetEnvironmentVariable(LibraryEnvVar);
                if (!string.IsNullOrEmpty(overridePath) && !File.Exists(overridePath))
                    throw new DllNotFoundException(LibraryEnvVar + " is set to '" + overridePath +
                        "', but that file does not exist. Point it at libint8attn.so (Linux), " +
                        "libint8attn.dylib (macOS) or int8attn.dll (Windows), or unset it.");
                InstallResolver(overridePath);
                uint abi;
                try
                {
                    abi = QueryAbiVersion();
                }
                catch (Exception e) when (e is DllNotFoundException || e is EntryPointNotFoundException || e is BadImageFormatException)
                {
                    throw new DllNotFoundException(
                        "The int8attn native library could not be loaded (" + e.Message + "). " +
                        "Set " + LibraryEnvVar + " to the full path of libint8attn.so / int8attn.dll, " +
                        "or put its directory on LD_LIBRARY_PATH (Linux), DYLD_LIBRARY_PATH (macOS) or PATH (Windows), " +
                        "or copy it next to the application. It is built by `cmake -S . -B build && cmake --build build` " +
                        "(build/lib/libint8attn.so).", e);
                }
                if (abi != Library.AbiVersion)
                    throw new Int8AttnException(Status.AbiMismatch,
                        "the loaded int8attn library has ABI version " + abi + " but these bindings were written for ABI " +
                        Library.AbiVersion + (LoadedFrom != null ? " (loaded from " + LoadedFrom + ")" : "") +
                        "; use a matching library (check " + LibraryEnvVar + " / LD_LIBRARY_PATH)");
                loaded = true;
            }
        }

        // A separate, non-inlined method: Mono binds a P/Invoke when it compiles the calling
        // method, which must happen after InstallResolver has preloaded INT8ATTN_LIBRARY.
        [MethodImpl(MethodImplOptions.NoInlining)]
        static uint QueryAbiVersion()
        {
            return NativeMethods.int8attn_abi_version();
        }

        static void InstallResolver(string overridePath)
        {
            if (resolverInstalled) return;
            resolverInstalled = true;
            Type nativeLibrary = Type.GetType("System.Runtime.InteropServices.NativeLibrary", false);
            MethodInfo setResolver = nativeLibrary == null ? null :
                nativeLibrary.GetMethod("SetDllImportResolver", BindingFlags.Public | BindingFlags.Static);
            if (setResolver != null)
            {
                // .NET Core 3+: NativeLibrary.SetDllImportResolver(assembly, Resolve).
                resolverOverride = overridePath;
                tryLoad = nativeLibrary.GetMethod("TryLoad", new[] { typeof(string), typeof(IntPtr).MakeByRefType() });
                Type resolverType = setResolver.GetParameters()[1].ParameterType;
                MethodInfo resolve = typeof(NativeLibraryLoader).GetMethod("Resolve", BindingFlags.NonPublic | BindingFlags.Static);
                Delegate d = Delegate.CreateDelegate(resolverType, resolve);
                setResolver.Invoke(null, new object[] { typeof(NativeLibraryLoader).Assembly, d });
            }
            else if (!string.IsNullOrEmpty(overridePath) && !IsWindows())
            {
                // Mono (or another runtime without NativeLibrary): preload by path; the dllmap
                // target (the soname) then resolves to the already loaded library.
                IntPtr h = Dl.Open(overridePath);
                if (h == IntPtr.Zero)
                    throw new DllNotFoundException(LibraryEnvVar + "='" + overridePath + "' could not be loaded: " + Dl.Error());
                LoadedFrom = overridePath;
            }
            else if (!string.IsNullOrEmpty(overridePath))
            {
                Win.LoadLibrary(overridePath); // DllImport("int8attn") then finds the loaded module
                LoadedFrom = overridePath;
            }
        }

        static string resolverOverride;
        static MethodInfo tryLoad;

        // Signature of System.Runtime.InteropServices.DllImportResolver.
        static IntPtr Resolve(string libraryName, Assembly assembly, DllImportSearchPath? searchPath)
        {
            if (libraryName != LibraryName) return IntPtr.Zero;
            var candidates = !string.IsNullOrEmpty(resolverOverride)
                ? new[] { resolverOverride }
                : (IsWindows() ? new string[0] : IsMac() ? new[] { "libint8attn.1.dylib" } : new[] { "libint8attn.so.1" });
            foreach (var c in candidates)
            {
                var args = new object[] { c, IntPtr.Zero };
                if ((bool)tryLoad.Invoke(null, args))
                {
                    LoadedFrom = c;
                    return (IntPtr)args[1];
                }
            }
            if (!string.IsNullOrEmpty(resolverOverride))
                throw new DllNotFoundException(LibraryEnvVar + "='" + resolverOverride + "' could not be loaded");
            return IntPtr.Zero; // default probing
        }

        static bool IsWindows() { return Path.DirectorySeparatorChar == '\\'; }
        static bool IsMac() { return RuntimeInformation.IsOSPlatform(OSPlatform.OSX); }

        static class Dl
        {
            const int RTLD_NOW = 2, RTLD_GLOBAL = 0x100;
            [DllImport("libdl.so.2", EntryPoint = "dlopen")] static extern IntPtr dlopen2(string file, int mode);
            [DllImport("libdl.so.2", EntryPoint = "dlerror")] static extern IntPtr dlerror2();
            [DllImport("libc", EntryPoint = "dlopen")] static extern IntPtr dlopenc(string file, int mode);
            [DllImport("libc", EntryPoint = "dlerror")] static extern IntPtr dlerrorc();

            internal static IntPtr Open(string path)
            {
                try { return dlopen2(path, RTLD_NOW | RTLD_GLOBAL); }
                catch (DllNotFoundException) { return dlopenc(path, RTLD_NOW | RTLD_GLOBAL); }
            }

            internal static string Error()
            {
                IntPtr p;
                try { p = dlerror2(); } catch (DllNotFoundException) { p = dlerrorc(); }
                return Utf8.FromNative(p);
            }
        }

        static class Win
        {
            [DllImport("kernel32", CharSet = CharSet.Unicode, SetLastError = true)]
            internal static extern IntPtr LoadLibrary(string path);
        }
    }

    internal static class Utf8
    {
        internal static unsafe string FromNative(IntPtr p)
        {
            if (p == IntPtr.Zero) return "";
            byte* b = (byte*)p;
            int n = 0;
            while (b[n] != 0) n++;
            return Encoding.UTF8.GetString(b, n);
        }
    }
}
