#include <atomic>

#include "cpu/thread_pool.h"

namespace int8attn {
namespace cpu {

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::thread::hardware_concurrency());
  size_ = num_threads < 1 ? 1 : num_threads;
  threads_.reserve(size_ - 1);
  for (int i = 1; i < size_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(m_);
    stop_ = true;
  }
  cv_start_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::run_items(int index) {
  for (;;) {
    const int64_t i = next_->fetch_add(1, std::memory_order_relaxed);
    if (i >= n_) break;
    try {
      (*fn_)(i, index);
    } catch (...) {
      std::lock_guard<std::mutex> lk(m_);
      if (!error_) error_ = std::current_exception();
      next_->store(n_, std::memory_order_relaxed);  // skip what is left
    }
  }
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(m_);
      cv_start_.wait(lk, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    run_items(index);
    {
      std::lock_guard<std::mutex> lk(m_);
      if (--busy_ == 0) cv_done_.notify_all();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int)>& fn) {
  if (n <= 0) return;
  std::lock_guard<std::mutex> call(call_mutex_);
  if (size_ == 1 || n == 1) {
    for (int64_t i = 0; i < n; ++i) fn(i, 0);
    return;
  }
  std::atomic_int64_t next{0};
  {
    std::lock_guard<std::mutex> lk(m_);
    fn_ = &fn;
    n_ = n;
    next_ = &next;
    error_ = nullptr;
    busy_ = size_ - 1;
    ++generation_;
  }
  cv_start_.notify_all();
  run_items(0);
  std::exception_ptr err;
  {
    std::unique_lock<std::mutex> lk(m_);
    cv_done_.wait(lk, [&] { return busy_ == 0; });
    err = error_;
    error_ = nullptr;
    fn_ = nullptr;
    next_ = nullptr;
  }
  if (err) std::rethrow_exception(err);
}

}  // namespace cpu
}  // namespace int8attn
