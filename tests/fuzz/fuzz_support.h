// Support code of the C-API fuzz target (fuzz_capi.cpp), independent of int8attn: the input
// reader, a small PRNG, float <-> f16/bf16 conversions written independently of the library's,
// exactly-sized heap buffers with snapshots, the failure report (with a trace of the calls made
// for the current input) and the capture of anything written to stdout/stderr during a call.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace fuzz {

// ---- input ------------------------------------------------------------------------------------

// Reads the fuzz input front to back, little-endian. Past the end every read returns 0, and the
// format (tests/fuzz/README.md) decodes 0 in every field as its default, valid value, so a short
// input is still a sequence of valid calls.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : p_(data), n_(size) {}
  bool empty() const { return pos_ >= n_; }
  uint8_t u8() { return pos_ < n_ ? p_[pos_++] : 0; }
  uint16_t u16() {
    const uint16_t lo = u8();
    return static_cast<uint16_t>(lo | (u8() << 8));
  }
  uint32_t u32() {
    const uint32_t lo = u16();
    return lo | (static_cast<uint32_t>(u16()) << 16);
  }
  uint64_t u64() {
    const uint64_t lo = u32();
    return lo | (static_cast<uint64_t>(u32()) << 32);
  }
  float f32() {
    const uint32_t u = u32();
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
};

// splitmix64: deterministic data from a seed taken from the input.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float uniform() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }  // [0, 1)
  float symmetric() { return 2.0f * uniform() - 1.0f; }                                // [-1, 1)

 private:
  uint64_t s_;
};

// ---- 16-bit floats (round to nearest even), independent of src/cpu/fp_convert.h ---------------

inline uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t to_f16(float f) {
  const uint32_t x = bits_of(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (ax >= 0x477ff000u) return sign | 0x7c00u;  // rounds to (or is) infinity
  if (ax < 0x38800000u) {                        // subnormal: multiples of 2^-24, exact scaling
    return sign | static_cast<uint16_t>(std::lrint(float_of(ax) * 16777216.0f));
  }
  return sign | static_cast<uint16_t>((ax + 0x0fffu + ((ax >> 13) & 1u) - 0x38000000u) >> 13);
}

inline float from_f16(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {
    const float v = std::ldexp(static_cast<float>(m), -24);
    return sign ? -v : v;
  }
  if (e == 31) return float_of(sign | 0x7f800000u | (m << 13));
  return float_of(sign | ((e + 112u) << 23) | (m << 13));
}

inline uint16_t to_bf16(float f) {
  const uint32_t x = bits_of(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
inline float from_bf16(uint16_t h) { return float_of(static_cast<uint32_t>(h) << 16); }

// ---- failure report ---------------------------------------------------------------------------

// Where reports go: a duplicate of the original stderr taken before libFuzzer closes fds 1/2
// (-close_fd_mask), so reports survive the output capture below.
inline int& report_fd() {
  static int fd = 2;
  return fd;
}

inline void write_all(int fd, const char* s, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

// The calls made for the current input, printed with any failure.
class Trace {
 public:
  void clear() { text_.clear(); }
  void add(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    if (text_.size() > 64 * 1024) return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    text_ += buf;
    text_ += '\n';
    if (verbose) {
      write_all(report_fd(), "[fuzz] ", 7);
      write_all(report_fd(), buf, std::strlen(buf));
      write_all(report_fd(), "\n", 1);
    }
  }
  const std::string& text() const { return text_; }
  bool verbose = false;  // INT8ATTN_FUZZ_VERBOSE=1: print every call as it is made

 private:
  std::string text_;
};

inline Trace& trace() {
  static Trace t;
  return t;
}

// ---- capture of stdout/stderr -----------------------------------------------------------------

// The library must never print. When libFuzzer runs with -close_fd_mask (its own output and the
// sanitizers' reports then go to a duplicate of stderr), fds 1 and 2 are pointed at a
// non-blocking pipe for the duration of each input and the pipe is drained after every call.
class Capture {
 public:
  void init(bool out, bool err) {
    out_ = out;
    err_ = err;
    if (!out_ && !err_) return;
    int fds[2];
    if (::pipe(fds) != 0) {
      out_ = err_ = false;
      return;
    }
    rfd_ = fds[0];
    wfd_ = fds[1];
    ::fcntl(rfd_, F_SETFL, ::fcntl(rfd_, F_GETFL) | O_NONBLOCK);
    ::fcntl(wfd_, F_SETFL, ::fcntl(wfd_, F_GETFL) | O_NONBLOCK);
  }
  bool enabled() const { return out_ || err_; }
  void begin() {
    if (active_) return;
    std::fflush(stdout);
    std::fflush(stderr);
    if (out_) saved_out_ = redirect(1);
    if (err_) saved_err_ = redirect(2);
    active_ = true;
  }
  void end() {
    if (!active_) return;
    std::fflush(stdout);
    std::fflush(stderr);
    if (out_) restore(1, saved_out_);
    if (err_) restore(2, saved_err_);
    active_ = false;
  }
  // What was written since the last drain (flushing C stdio first).
  std::string drain() {
    std::string s;
    if (!active_) return s;
    std::fflush(stdout);
    std::fflush(stderr);
    char buf[512];
    for (;;) {
      const ssize_t n = ::read(rfd_, buf, sizeof buf);
      if (n <= 0) break;
      if (s.size() < 4096) s.append(buf, static_cast<size_t>(n));
    }
    return s;
  }

 private:
  int redirect(int fd) {
    const int saved = ::dup(fd);
    ::dup2(wfd_, fd);
    return saved;
  }
  static void restore(int fd, int saved) {
    if (saved < 0) return;
    ::dup2(saved, fd);
    ::close(saved);
  }
  bool out_ = false, err_ = false, active_ = false;
  int rfd_ = -1, wfd_ = -1, saved_out_ = -1, saved_err_ = -1;
};

inline Capture& capture() {
  static Capture c;
  return c;
}

// A violated check: print the reason and the calls made for this input, then abort (libFuzzer
// saves the input as a crash artifact).
[[noreturn]] inline void fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
[[noreturn]] inline void fail(const char* fmt, ...) {
  capture().end();
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::string s = "\n==int8attn-fuzz== CHECK FAILED: ";
  s += buf;
  s += "\n==int8attn-fuzz== calls for this input (last one failed):\n";
  s += trace().text();
  write_all(report_fd(), s.data(), s.size());
  std::abort();
}

// ---- buffers ----------------------------------------------------------------------------------

// Heap buffers of exactly the requested size (so AddressSanitizer flags any access past the end),
// with snapshots to prove what a call did or did not write.
class Arena {
 public:
  ~Arena() { clear(); }
  int alloc(size_t size) {
    Buf b;
    b.size = size;
    b.base = static_cast<uint8_t*>(std::malloc(size ? size : 1));
    if (!b.base) fail("harness: malloc(%zu) failed", size);
    bufs_.push_back(std::move(b));
    return static_cast<int>(bufs_.size()) - 1;
  }
  uint8_t* base(int i) { return bufs_[i].base; }
  const uint8_t* base(int i) const { return bufs_[i].base; }
  size_t size(int i) const { return bufs_[i].size; }
  int count() const { return static_cast<int>(bufs_.size()); }
  void snapshot() {
    for (Buf& b : bufs_) b.snap.assign(b.base, b.base + b.size);
  }
  bool unchanged(int i) const {
    const Buf& b = bufs_[i];
    return b.snap.size() == b.size &&
           (b.size == 0 || std::memcmp(b.snap.data(), b.base, b.size) == 0);
  }
  const uint8_t* snap(int i) const { return bufs_[i].snap.data(); }
  // First byte that differs from the snapshot, or -1.
  long first_change(int i) const {
    const Buf& b = bufs_[i];
    for (size_t k = 0; k < b.size; ++k)
      if (b.base[k] != b.snap[k]) return static_cast<long>(k);
    return -1;
  }
  void clear() {
    for (Buf& b : bufs_) std::free(b.base);
    bufs_.clear();
  }

 private:
  struct Buf {
    uint8_t* base = nullptr;
    size_t size = 0;
    std::vector<uint8_t> snap;
  };
  std::vector<Buf> bufs_;
};

}  // namespace fuzz
