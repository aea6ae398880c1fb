#include <atomic>
#include <string>
#include <system_error>

#include "core/error.h"
#include "cpu/thread_pool.h"

namespace int8attn {
namespace cpu {

ThreadPool::ThreadPool(int num_threads, const ThreadFactory& factory) {
  const int requested = num_threads;
  if (num_threads <= 0) num_threads = static_cast<int>(std::thread::hardware_concurrency());
  size_ = num_threads < 1 ? 1 : (num_threads > kMaxThreads ? kMaxThreads : num_threads);
  // A constructor that throws runs no destructor, but the members' destructors still run: a
  // joinable std::thread terminates the process, and destroying cv_start_ waits (glibc) for the
  // workers blocked on it, forever. So on any failure the started workers are stopped and
  // joined here before the exception leaves.
  int i = 1;
  try {
    threads_.reserve(size_ - 1);
    for (; i < size_; ++i) {
      std::function<void()> body = [this, i] { worker(i); };
      threads_.push_back(factory ? factory(std::move(body)) : std::thread(std::move(body)));
    }
  } catch (const std::system_error& e) {
    stop_and_join();
    std::string what = "num_threads is " + std::to_string(requested);
    if (requested != size_) what += " (" + std::to_string(size_) + " threads)";
    throw Error(INT8ATTN_ERROR_OUT_OF_MEMORY,
                what + ": could not start CPU worker thread " + std::to_string(i) + " of " +
                    std::to_string(size_ - 1) + " (" + e.what() +
                    "); lower params->num_threads of int8attn_context_create, or free system "
                    "resources (thread limit, memory)");
  } catch (...) {
    stop_and_join();
    throw;
  }
}

ThreadPool::~ThreadPool() { stop_and_join(); }

void ThreadPool::stop_and_join() noexcept {
  {
    std::lock_guard<std::mutex> lk(m_);
    stop_ = true;
  }
  cv_start_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
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
