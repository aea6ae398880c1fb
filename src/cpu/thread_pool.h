// A small fixed-size thread pool owned by the CPU backend: parallel_for over an index range with
// dynamic scheduling. The calling thread takes part, so a pool of size 1 has no worker threads.
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
  // num_threads <= 0: std::thread::hardware_concurrency().
  explicit ThreadPool(int num_threads);
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
