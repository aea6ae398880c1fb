using System;

namespace Int8Attn
{
    /// <summary>Version and feature queries of the loaded library.</summary>
    public static class Library
    {
        /// <summary>The ABI these bindings were written for (INT8ATTN_ABI_VERSION).</summary>
        public const uint AbiVersion = 1;
        /// <summary>The header version these bindings mirror (INT8ATTN_VERSION_STRING).</summary>
        public const string BindingsVersion = "0.1.0";

        /// <summary>The loaded library's version string, e.g. "0.1.0".</summary>
        public static string Version
        {
            get { NativeLibraryLoader.EnsureLoaded(); return Utf8.FromNative(NativeMethods.int8attn_version_string()); }
        }

        /// <summary>major·10000 + minor·100 + patch of the loaded library.</summary>
        public static uint VersionNumber
        {
            get { NativeLibraryLoader.EnsureLoaded(); return NativeMethods.int8attn_version_number(); }
        }

        /// <summary>The loaded library's ABI version.</summary>
        public static uint LoadedAbiVersion
        {
            get { NativeLibraryLoader.EnsureLoaded(); return NativeMethods.int8attn_abi_version(); }
        }

        /// <summary>Backends and GPU architectures of the loaded library.</summary>
        public static Features Features
        {
            get { NativeLibraryLoader.EnsureLoaded(); return (Features)NativeMethods.int8attn_features(); }
        }

        /// <summary>Number of usable CUDA devices (0 without CUDA, driver or device).</summary>
        public static int DeviceCount
        {
            get
            {
                NativeLibraryLoader.EnsureLoaded();
                int n;
                Check(NativeMethods.int8attn_device_count(out n));
                return n;
            }
        }

        /// <summary>Description of a CUDA device.</summary>
        public static unsafe string DescribeDevice(int deviceId)
        {
            NativeLibraryLoader.EnsureLoaded();
            byte* buf = stackalloc byte[256];
            Check(NativeMethods.int8attn_device_describe(buf, (UIntPtr)256, deviceId));
            return Utf8.FromNative((IntPtr)buf);
        }

        /// <summary>The library's description of a status code.</summary>
        public static string StatusString(Status status)
        {
            NativeLibraryLoader.EnsureLoaded();
            return Utf8.FromNative(NativeMethods.int8attn_status_string((int)status));
        }

        /// <summary>Throw <see cref="Int8AttnException"/> for a failed status, with this thread's
        /// int8attn_last_error() message (read immediately, on the calling thread).</summary>
        internal static void Check(int status)
        {
            if (status != 0)
                throw new Int8AttnException((Status)status, Utf8.FromNative(NativeMethods.int8attn_last_error()));
        }
    }
}
