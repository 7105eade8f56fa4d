// The GPSIMD engine's 8 cores as 8 worker threads. A multicore launch runs
// the kernel once on every core and returns when all have finished; one
// launch runs at a time, as the engine runs one kernel at a time.
#pragma once

#include <c10/util/Exception.h>

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include <unistd.h>

#include <torchneuron/detail/core_state.h>

namespace torchneuron::gpsimd {

class CorePool {
 public:
  // Never destroyed: its threads wait for work until the process exits. A
  // forked child has none of its parent's threads, so it gets a pool of its own.
  static CorePool& instance() {
    static std::mutex mu;
    static CorePool* pool = nullptr;
    static pid_t owner = 0;
    std::lock_guard<std::mutex> lock(mu);
    if (pool == nullptr || owner != getpid()) {
      pool = new CorePool();
      owner = getpid();
    }
    return *pool;
  }

  // Runs fn(core_id) on every core; rethrows the first exception raised.
  void run(const std::function<void(uint32_t)>& fn) {
    TORCH_CHECK(!is_worker(), "a multicore kernel cannot launch a multicore op from inside a GPSIMD core");
    std::lock_guard<std::mutex> launch(launch_mu_);
    std::unique_lock<std::mutex> lock(mu_);
    if (!started_) {
      for (uint32_t id = 0; id < kNumCores; ++id) std::thread([this, id] { loop(id); }).detach();
      started_ = true;
    }
    task_ = &fn;
    error_ = nullptr;
    remaining_ = kNumCores;
    ++generation_;
    work_cv_.notify_all();
    done_cv_.wait(lock, [&] { return remaining_ == 0; });
    task_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  static bool& is_worker() {
    static thread_local bool worker = false;
    return worker;
  }

  void loop(uint32_t id) {
    is_worker() = true;
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      work_cv_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      const auto* task = task_;
      lock.unlock();
      std::exception_ptr error;
      try {
        (*task)(id);
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      if (error && !error_) error_ = error;
      if (--remaining_ == 0) done_cv_.notify_one();
    }
  }

  std::mutex launch_mu_;
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  const std::function<void(uint32_t)>* task_ = nullptr;
  uint64_t generation_ = 0;
  uint32_t remaining_ = 0;
  std::exception_ptr error_;
  bool started_ = false;
};

}  // namespace torchneuron::gpsimd
