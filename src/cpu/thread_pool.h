// A small fixed-size thread pool owned by the CPU backend: parallel_for over an index range with
// dynamic scheduling. The calling thread takes part, so a pool of size 1 has no worker threads.
// All threads start in the constructor; if one cannot be started, the constructor stops and
// joins those it did start and throws: the pool exists whole or not at all.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace int8attn {
namespace cpu {

class ThreadPool {
 public:
  // Largest pool: the context rejects more (params->num_threads), and a larger
  // hardware_concurrency() is clamped to it.
  static constexpr int kMaxThreads = 1024;
  // Starts a thread running `body` (std::thread by default); tests inject failures through it.
  using ThreadFactory = std::function<std::thread(std::function<void()> body)>;

  // num_threads <= 0: std::thread::hardware_concurrency(); at most kMaxThreads either way.
  // Throws Error(OUT_OF_MEMORY) naming num_threads when a thread cannot be started
  // (std::system_error from the factory), std::bad_alloc as is; no thread is left running.
  explicit ThreadPool(int num_threads, const ThreadFactory& factory = ThreadFactory());
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return size_; }
  // Calls fn(i, thread_index) for every i in [0, n); thread_index in [0, size()). Rethrows the
  // first exception any call threw (the others are still completed or skipped).
  void parallel_for(int64_t n, const std::function<void(int64_t, int)>& fn);

 private:
  void worker(int index);
  void run_items(int index);
  void stop_and_join() noexcept;

  int size_ = 1;
  std::vector<std::thread> threads_;
  std::mutex call_mutex_;  // one parallel_for at a time
  std::mutex m_;
  std::condition_variable cv_start_, cv_done_;
  uint64_t generation_ = 0;
  int busy_ = 0;
  bool stop_ = false;
  const std::function<void(int64_t, int)>* fn_ = nullptr;
  int64_t n_ = 0;
  std::atomic_int64_t* next_ = nullptr;
  std::exception_ptr error_;
};

}  // namespace cpu
}  // namespace int8attn
