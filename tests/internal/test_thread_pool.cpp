// The CPU thread pool (src/cpu/thread_pool.cpp, compiled into this test: the library hides it).
// A thread that cannot be started is an error the pool reports after stopping and joining the
// workers it did start: never std::terminate, never a hang. The failure is injected through the
// pool's thread factory, so this runs under every sanitizer (TSan included).
#include <gtest/gtest.h>

#include <atomic>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "core/error.h"
#include "cpu/thread_pool.h"

using int8attn::cpu::ThreadPool;

namespace {

// Starts threads like std::thread, except that start number `fail_at` (0-based) throws `E`
// as std::thread does when the system has no thread to give (EAGAIN).
struct FailingFactory {
  int fail_at;
  bool bad_alloc = false;
  std::shared_ptr<std::atomic<int>> started = std::make_shared<std::atomic<int>>(0);

  ThreadPool::ThreadFactory make() const {
    auto n = started;
    const int k = fail_at;
    const bool oom = bad_alloc;
    return [n, k, oom](std::function<void()> body) {
      if (n->load() == k) {
        if (oom) throw std::bad_alloc();
        throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                                "pthread_create");
      }
      n->fetch_add(1);
      return std::thread(std::move(body));
    };
  }
};

TEST(ThreadPool, RunsEveryItemOnce) {
  ThreadPool pool(4);
  EXPECT_EQ(pool.size(), 4);
  std::vector<std::atomic<int>> hits(1000);
  pool.parallel_for(1000, [&](int64_t i, int t) {
    ASSERT_GE(t, 0);
    ASSERT_LT(t, 4);
    hits[i].fetch_add(1);
  });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
}

TEST(ThreadPool, ThreadStartFailureIsAnError) {
  // The first worker, a middle one and the last one of a 16-thread pool (15 workers).
  for (int fail_at : {0, 1, 7, 14}) {
    SCOPED_TRACE("start " + std::to_string(fail_at) + " fails");
    FailingFactory f{fail_at};
    try {
      ThreadPool pool(16, f.make());
      FAIL() << "the pool was built without all its threads";
    } catch (const int8attn::Error& e) {
      EXPECT_EQ(e.status(), INT8ATTN_ERROR_OUT_OF_MEMORY);
      const std::string msg = e.what();
      EXPECT_NE(msg.find("num_threads is 16"), std::string::npos) << msg;
      EXPECT_NE(msg.find("thread " + std::to_string(fail_at + 1)), std::string::npos) << msg;
    }
    // Every thread that was started has been joined (the destructor of a joinable std::thread
    // would have terminated the process before we got here).
    EXPECT_EQ(f.started->load(), fail_at);
  }
}

TEST(ThreadPool, AllocationFailureWhileStartingIsOutOfMemory) {
  FailingFactory f{2, true};
  EXPECT_THROW(ThreadPool(6, f.make()), std::bad_alloc);
  EXPECT_EQ(f.started->load(), 2);
}

TEST(ThreadPool, SizeIsClampedToTheCap) {
  // The context rejects num_threads above the cap; the pool clamps whatever reaches it
  // (hardware_concurrency() included) without starting that many threads here.
  FailingFactory f{0};
  try {
    ThreadPool pool(ThreadPool::kMaxThreads + 5, f.make());
    FAIL();
  } catch (const int8attn::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("(" + std::to_string(ThreadPool::kMaxThreads) + " threads)"),
              std::string::npos)
        << msg;
  }
}

}  // namespace
