// Child process of the test "a missing library gives an actionable DllNotFoundException"
// (Int8Attn.Tests/MissingLibraryTests.cs): started with INT8ATTN_LIBRARY pointing at a file that
// does not exist, it touches the library and prints what happened.
//
// Exit status: 0 a DllNotFoundException (printed as "Type: message"), 2 another exception,
// 3 the library loaded.
using System;
using Int8Attn;

static class Program
{
    static int Main()
    {
        try
        {
            Console.WriteLine("loaded int8attn " + Library.Version + " from " + (NativeLibraryLoader.LoadedFrom ?? "the runtime's probing"));
            return 3;
        }
        catch (Exception e)
        {
            Console.WriteLine(e.GetType().FullName + ": " + e.Message);
            return e is DllNotFoundException ? 0 : 2;
        }
    }
}
