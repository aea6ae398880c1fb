using System;

namespace Int8Attn
{
    /// <summary>
    /// Shape, strides (in elements) and dtype of a tensor, without its memory. Host calls take a
    /// Span plus a layout; the layout is checked so that every addressed element lies in the span.
    /// Attention tensors are rank 4 in the logical order [B, H, N, D]; NHD memory is just another
    /// stride pattern (<see cref="Nhd"/>).
    /// </summary>
    public sealed class TensorLayout
    {
        /// <summary>Element type.</summary>
        public DType DType { get; private set; }
        /// <summary>Sizes.</summary>
        public long[] Shape { get; private set; }
        /// <summary>Strides in elements (0 broadcasts).</summary>
        public long[] Strides { get; private set; }

        /// <summary>A layout with explicit strides.</summary>
        public TensorLayout(DType dtype, long[] shape, long[] strides)
        {
            if (shape == null) throw new ArgumentNullException("shape");
            if (strides == null) throw new ArgumentNullException("strides");
            if (shape.Length < 1 || shape.Length > TensorDescriptor.MaxRank)
                throw new Int8AttnException(Status.BadShape, "tensor rank is " + shape.Length + "; it must be in [1, " + TensorDescriptor.MaxRank + "]");
            if (strides.Length != shape.Length)
                throw new Int8AttnException(Status.BadStride, strides.Length + " strides given for a tensor of rank " + shape.Length);
            DType = dtype;
            Shape = (long[])shape.Clone();
            Strides = (long[])strides.Clone();
        }

        /// <summary>A row-major layout.</summary>
        public static TensorLayout Contiguous(DType dtype, params long[] shape)
        {
            return new TensorLayout(dtype, shape, ContiguousStrides(shape));
        }

        /// <summary>Logical shape [B, H, N, D] stored as [B, N, H, D] in memory.</summary>
        public static TensorLayout Nhd(DType dtype, long b, long h, long n, long d)
        {
            return new TensorLayout(dtype, new[] { b, h, n, d }, new[] { n * h * d, d, h * d, 1 });
        }

        /// <summary>Row-major strides of a shape.</summary>
        public static long[] ContiguousStrides(long[] shape)
        {
            var s = new long[shape.Length];
            long acc = 1;
            for (int i = shape.Length - 1; i >= 0; i--) { s[i] = acc; acc *= Math.Max(shape[i], 1); }
            return s;
        }

        /// <summary>Bytes per element of a dtype.</summary>
        public static int ElementSize(DType dtype)
        {
            switch (dtype)
            {
                case DType.F16: case DType.BF16: return 2;
                case DType.F32: case DType.I32: return 4;
                default: return 1;
            }
        }

        /// <summary>Number of elements a buffer needs: max offset + 1 (0 for an empty tensor).</summary>
        public long RequiredLength()
        {
            long max = 0;
            for (int i = 0; i < Shape.Length; i++)
            {
                if (Shape[i] < 0) throw new Int8AttnException(Status.BadShape, "shape[" + i + "] is " + Shape[i] + "; sizes must not be negative");
                if (Strides[i] < 0) throw new Int8AttnException(Status.BadStride, "strides[" + i + "] is " + Strides[i] + "; strides must not be negative");
                if (Shape[i] == 0) return 0;
                try { max = checked(max + (Shape[i] - 1) * Strides[i]); }
                catch (OverflowException) { throw new Int8AttnException(Status.SizeOverflow, "the tensor's extent overflows 64 bits"); }
            }
            return max + 1;
        }

        internal void CheckBuffer(int length, int elementSize, string name)
        {
            if (ElementSize(DType) != elementSize)
                throw new Int8AttnException(Status.BadDtype, name + ": dtype " + DType + " does not match a buffer of " + elementSize + "-byte elements");
            long need = RequiredLength();
            if (need > length)
                throw new Int8AttnException(Status.BadShape, name + ": buffer has " + length + " elements but shape [" +
                    string.Join(", ", Shape) + "] with strides [" + string.Join(", ", Strides) + "] addresses " + need);
        }

        internal TensorDescriptor Describe(IntPtr data)
        {
            return TensorDescriptor.Create(data, DeviceType.Cpu, 0, DType, Shape, Strides);
        }
    }

    /// <summary>fp16 / bf16 bit patterns to and from float (round to nearest even).</summary>
    public static class HalfBits
    {
        /// <summary>float → IEEE binary16 bits.</summary>
        public static ushort FromSingle(float x)
        {
            uint b = (uint)BitConverter.ToInt32(BitConverter.GetBytes(x), 0);
            uint sign = (b >> 16) & 0x8000;
            int exp = (int)((b >> 23) & 0xff);
            uint man = b & 0x7fffff;
            if (exp == 0xff) return (ushort)(sign | 0x7c00 | (man != 0 ? 0x200u : 0u));
            int e = exp - 127 + 15;
            if (e >= 0x1f) return (ushort)(sign | 0x7c00);
            if (e <= 0)
            {
                if (e < -10) return (ushort)sign;
                uint m = man | 0x800000;
                int shift = 14 - e;
                uint half = 1u << (shift - 1), rest = m & ((1u << shift) - 1), r = m >> shift;
                if (rest > half || (rest == half && (r & 1) == 1)) r++;
                return (ushort)(sign | r);
            }
            uint res = ((uint)e << 10) | (man >> 13);
            uint rem = man & 0x1fff;
            if (rem > 0x1000 || (rem == 0x1000 && (res & 1) == 1)) res++;
            return (ushort)(sign | res);
        }

        /// <summary>IEEE binary16 bits → float (exact).</summary>
        public static float ToSingle(ushort h)
        {
            uint sign = ((uint)h & 0x8000) << 16;
            uint exp = ((uint)h >> 10) & 0x1f, man = (uint)h & 0x3ff;
            if (exp == 0)
            {
                float v = man * (1.0f / 16777216.0f);
                return sign != 0 ? -v : v;
            }
            uint bits = exp == 0x1f ? (sign | 0x7f800000 | (man << 13)) : (sign | ((exp + 112) << 23) | (man << 13));
            return BitConverter.ToSingle(BitConverter.GetBytes(bits), 0);
        }

        /// <summary>float → bfloat16 bits.</summary>
        public static ushort BF16FromSingle(float x)
        {
            uint b = (uint)BitConverter.ToInt32(BitConverter.GetBytes(x), 0);
            if (float.IsNaN(x)) return (ushort)((b >> 16) | 0x40);
            return (ushort)((b + 0x7fff + ((b >> 16) & 1)) >> 16);
        }

        /// <summary>bfloat16 bits → float (exact).</summary>
        public static float BF16ToSingle(ushort h)
        {
            return BitConverter.ToSingle(BitConverter.GetBytes((uint)h << 16), 0);
        }
    }
}
