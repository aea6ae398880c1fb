// The CPU thread count of a context: the documented cap on params->num_threads, and a system
// that cannot start the requested threads. The pool starts on the first CPU call; when a thread
// cannot be started that call must fail with a status (not terminate, not hang) and a later call
// must be able to try again.
//
// Thread-start failure is injected by interposing pthread_create in this executable: the
// library's std::thread calls pthread_create through libstdc++, whose dynamic reference this
// definition wins; the original is found with dlsym(RTLD_NEXT). Sanitizers whose runtime is
// linked into the executable (clang's ASan/TSan, GCC's TSan) define pthread_create themselves
// to track threads, so the interposer is left out there and the failure test skips; the internal
// test tests/internal/test_thread_pool.cpp covers the same path with a thread factory under
// every sanitizer.
#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <cerrno>
#include <string>
#include <vector>

#include "capi_fixture.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define I8A_NO_INTERPOSER 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define I8A_NO_INTERPOSER 1
#endif

#ifndef I8A_NO_INTERPOSER
namespace {

// Calls of pthread_create still allowed to succeed; negative = no injection.
std::atomic<int> g_starts_left{-1};
std::atomic<int> g_refused{0};

}  // namespace

extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*),
                              void* arg) noexcept {
  using Fn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  static const Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "pthread_create"));
  if (g_starts_left.load() >= 0 && g_starts_left.fetch_sub(1) <= 0) {
    g_refused.fetch_add(1);
    return EAGAIN;  // what glibc returns when RLIMIT_NPROC or memory for stacks runs out
  }
  return real(thread, attr, start, arg);
}
#endif

namespace {

TEST(Threads, NumThreadsAboveTheCapIsRejected) {
  int8attn_context_params_t cp;
  int8attn_context_params_init(&cp);
  int8attn_context_t* ctx = reinterpret_cast<int8attn_context_t*>(0x1);
  for (int32_t n : {1025, 4096, 1 << 30, 0x7fffffff}) {
    cp.num_threads = n;
    EXPECT_EQ(int8attn_context_create(&ctx, &cp), INT8ATTN_ERROR_BAD_VALUE) << n;
    EXPECT_EQ(ctx, nullptr);
    const std::string msg = int8attn_last_error();
    EXPECT_NE(msg.find("params->num_threads is " + std::to_string(n)), std::string::npos) << msg;
    EXPECT_NE(msg.find("1024"), std::string::npos) << msg;
  }
  // The cap itself is accepted (the threads start on the first CPU call, not here).
  cp.num_threads = 1024;
  ASSERT_EQ(int8attn_context_create(&ctx, &cp), INT8ATTN_OK) << int8attn_last_error();
  int8attn_context_destroy(ctx);
}

TEST(Threads, ThreadStartFailureIsAnErrorAndTheNextCallRetries) {
#ifdef I8A_NO_INTERPOSER
  GTEST_SKIP() << "a sanitizer runtime owns pthread_create in this build";
#else
  const std::vector<int64_t> shape = {1, 2, 48, 32};
  capi::Buffer q(capi::numel(shape) * 4), o(capi::numel(shape) * 4);
  capi::fill_pattern(q.as<float>(), capi::numel(shape), 5);
  const int8attn_tensor_t tq = capi::make_tensor(q.base, INT8ATTN_DTYPE_F32, shape);
  const int8attn_tensor_t to = capi::make_tensor(o.base, INT8ATTN_DTYPE_F32, shape);
  // The first worker, one in the middle, the last one (a pool of 8 starts 7 workers).
  for (int fail_at : {0, 3, 6}) {
    SCOPED_TRACE("thread start " + std::to_string(fail_at) + " fails");
    int8attn_context_params_t cp;
    int8attn_context_params_init(&cp);
    cp.num_threads = 8;
    int8attn_context_t* ctx = nullptr;
    ASSERT_EQ(int8attn_context_create(&ctx, &cp), INT8ATTN_OK) << int8attn_last_error();
    o.poison();
    g_refused = 0;
    g_starts_left = fail_at;
    const int8attn_status_t s = int8attn_forward(ctx, &tq, &tq, &tq, &to, nullptr);
    g_starts_left = -1;
    const std::string msg = int8attn_last_error();
    EXPECT_EQ(g_refused.load(), 1) << "the injection did not run (pthread_create not interposed)";
    EXPECT_EQ(s, INT8ATTN_ERROR_OUT_OF_MEMORY) << msg;
    EXPECT_NE(msg.find("num_threads"), std::string::npos) << msg;
    EXPECT_TRUE(o.poisoned()) << "o was written by a failed call";
    // Nothing was left half-built: the next call starts the pool and runs.
    EXPECT_EQ(int8attn_forward(ctx, &tq, &tq, &tq, &to, nullptr), INT8ATTN_OK)
        << int8attn_last_error();
    EXPECT_FALSE(o.poisoned());
    int8attn_context_destroy(ctx);
  }
#endif
}

}  // namespace
