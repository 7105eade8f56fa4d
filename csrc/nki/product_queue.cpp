// A worker thread per simulated NeuronCore that runs nc_matmul's products (an sgemm, then a store or an
// accumulation into PSUM) in the order they were issued, while the core's Python thread goes on with the
// kernel's next instructions. The thread never touches a Python object or the GIL: the Python side
// (torchneuron_ext/nki/engines/products.py) hands it raw addresses of arrays it keeps alive, and waits for it
// before anything reads or reuses that memory.
//
// The sgemm is the BLAS numpy itself calls, found by the Python side, called with the arguments numpy's matmul
// passes for `a.T @ b`: the products are bit for bit those of the synchronous path.
#include "nki/product_queue.h"

#include <pybind11/pybind11.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace py = pybind11;

namespace torchneuron::nki {
namespace {

constexpr std::chrono::microseconds kSpin{100};      // the worker's wait for the next product
constexpr std::chrono::microseconds kWaitSpin{300};  // a waiter's for the running one

// CBLAS's enums (cblas.h): the ABI every CBLAS shares.
constexpr int kRowMajor = 101;
constexpr int kNoTrans = 111;
constexpr int kTrans = 112;

using Sgemm64 = void (*)(int, int, int, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
                         int64_t, float, float*, int64_t);
using Sgemm32 = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*,
                         int);

struct Product {
  const float* a;       // stationary, (k, m) C-contiguous
  const float* b;       // moving, (k, n) C-contiguous
  float* target;        // PSUM, m rows of n contiguous floats, `ld` floats apart
  int64_t k, m, n, ld;
  bool accumulate;      // target = target + a.T @ b (PSUM's value first), else target = a.T @ b
};

class ProductQueue {
 public:
  ProductQueue(uintptr_t sgemm, bool int64) : sgemm_(sgemm), int64_(int64) {
    if (sgemm_ == 0) throw std::invalid_argument("ProductQueue needs the address of a CBLAS sgemm");
    thread_ = std::thread([this] { run(); });
  }

  ~ProductQueue() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    work_cv_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

  // Queue a product; its ticket (1, 2, ...), which wait() and completed() speak of.
  uint64_t submit(uintptr_t a, uintptr_t b, uintptr_t target, int64_t k, int64_t m, int64_t n, int64_t ld,
                  bool accumulate) {
    if (k <= 0 || m <= 0 || n <= 0 || ld < n)
      throw std::invalid_argument("ProductQueue.submit: bad shape (k, m, n, ld)");
    bool wake;
    uint64_t ticket;
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(Product{reinterpret_cast<const float*>(a), reinterpret_cast<const float*>(b),
                               reinterpret_cast<float*>(target), k, m, n, ld, accumulate});
      ticket = ++submitted_;
      // A sleeping worker is woken only for a second product waiting behind another: waking it costs this
      // thread a futex call across the VM's vCPUs (17-40 us), more than a product it would run before the
      // core reads it back (AWS's shard-on-H kernel reads each one at once), and a lone product left
      // unstarted is run by whoever waits for it. A worker still busy, or watching for work, needs none.
      wake = idle_ && queue_.size() >= 2;
      if (wake) idle_ = false;
    }
    if (wake) work_cv_.notify_one();
    return ticket;
  }

  // Until the product of `ticket` (and every one before it) is done. A product nobody has started is run
  // here rather than waited for: a kernel that reads PSUM right after each matmul would otherwise pay a
  // wake-up of the worker and one of itself per product.
  void wait(uint64_t ticket) {
    const auto until = std::chrono::steady_clock::now() + kWaitSpin;
    while (completed_ < ticket && running_) {
      pause();  // the worker is on it: a product is over in tens to hundreds of microseconds, a futex sleep
      if (std::chrono::steady_clock::now() > until) break;  // and wake-up costs about as much
    }
    static thread_local std::vector<float> scratch;
    std::unique_lock<std::mutex> lock(mu_);
    while (completed_ < ticket) {
      if (running_ || queue_.empty()) {
        done_cv_.wait(lock);
        continue;
      }
      const Product p = start_next();
      lock.unlock();
      compute_reporting(p, scratch);
      lock.lock();
      finish_one();
    }
    if (idle_ && !queue_.empty()) {  // products after `ticket`, for the sleeping worker
      idle_ = false;
      work_cv_.notify_one();
    }
    if (!error_.empty()) throw std::runtime_error("an nc_matmul product failed on its worker thread: " + error_);
  }

  uint64_t completed() const { return completed_; }

 private:
  // With mu_ held: a product is ready when queued and nobody (worker or waiter) is running one, since the
  // products into one PSUM tile must run one after the other, in order.
  bool ready() const { return !queue_.empty() && !running_; }

  Product start_next() {
    running_ = true;
    return queue_.front();
  }

  void finish_one() {
    queue_.pop_front();
    ++completed_;
    running_ = false;
    done_cv_.notify_all();
  }

  void run() {
    std::vector<float> scratch;
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (!ready() && !stop_) {
        lock.unlock();
        spin_for_work();
        lock.lock();
      }
      while (!ready()) {
        if (stop_ && queue_.empty()) return;
        idle_ = true;
        work_cv_.wait(lock);
      }
      idle_ = false;
      const Product p = start_next();
      lock.unlock();
      compute_reporting(p, scratch);
      lock.lock();
      finish_one();
    }
  }

  void compute_reporting(const Product& p, std::vector<float>& scratch) {
    try {
      compute(p, scratch);
    } catch (const std::exception& e) {  // out of memory for the scratch: reported by the next wait()
      std::lock_guard<std::mutex> lock(mu_);
      if (error_.empty()) error_ = e.what();
    }
  }

  // A core issues its next product a few tens of microseconds after the last one ended, and waking a sleeping
  // thread costs the issuing core about 17 us here (a futex wake across the VM's vCPUs): the worker waits a
  // while on its own first. One worker in the process at a time, so that waiting workers never take both
  // vCPUs from the cores' own threads.
  void spin_for_work() {
    if (spinning_workers().fetch_add(1) != 0) {
      spinning_workers().fetch_sub(1);
      return;
    }
    const auto until = std::chrono::steady_clock::now() + kSpin;
    while (!stop_) {
      if (submitted_ > completed_ && !running_) break;
      pause();
      if (std::chrono::steady_clock::now() > until) break;
    }
    spinning_workers().fetch_sub(1);
  }

  static std::atomic<int>& spinning_workers() {
    static std::atomic<int> count{0};
    return count;
  }

  static void pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }

  void gemm(const Product& p, float* c, int64_t ldc) const {
    // numpy's matmul of a.T (an F-contiguous view of a C-contiguous (k, m)) by a C-contiguous b: row-major,
    // the first operand transposed with lda = m, the second as it is with ldb = n, alpha 1, beta 0.
    if (int64_) {
      reinterpret_cast<Sgemm64>(sgemm_)(kRowMajor, kTrans, kNoTrans, p.m, p.n, p.k, 1.0f, p.a, p.m, p.b, p.n,
                                        0.0f, c, ldc);
    } else {
      reinterpret_cast<Sgemm32>(sgemm_)(kRowMajor, kTrans, kNoTrans, static_cast<int>(p.m), static_cast<int>(p.n),
                                        static_cast<int>(p.k), 1.0f, p.a, static_cast<int>(p.m), p.b,
                                        static_cast<int>(p.n), 0.0f, c, static_cast<int>(ldc));
    }
  }

  void compute(const Product& p, std::vector<float>& scratch) const {
    if (!p.accumulate) {
      gemm(p, p.target, p.ld);
      return;
    }
    scratch.resize(static_cast<size_t>(p.m * p.n));
    gemm(p, scratch.data(), p.n);
    for (int64_t i = 0; i < p.m; ++i) {
      float* row = p.target + i * p.ld;
      const float* add = scratch.data() + i * p.n;
      for (int64_t j = 0; j < p.n; ++j) row[j] = row[j] + add[j];
    }
  }

  const uintptr_t sgemm_;
  const bool int64_;
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<Product> queue_;
  bool idle_ = true;  // the worker sleeps on work_cv_
  // Changed only with mu_ held (the condition variables' predicates); atomic, so that the waiting worker and
  // waiters may watch them without it.
  std::atomic<uint64_t> submitted_{0}, completed_{0};
  std::atomic<bool> running_{false};  // a product is being computed (by the worker or a waiter)
  std::atomic<bool> stop_{false};
  std::string error_;
  std::thread thread_;
};

}  // namespace

void init_bindings(py::module& m) {
  py::class_<ProductQueue>(m, "_NKIProductQueue",
                           "nc_matmul products run in order on a thread of their own (nki/engines/products.py)")
      .def(py::init<uintptr_t, bool>(), py::arg("sgemm"), py::arg("int64"))
      .def("submit", &ProductQueue::submit, py::arg("a"), py::arg("b"), py::arg("target"), py::arg("k"),
           py::arg("m"), py::arg("n"), py::arg("ld"), py::arg("accumulate"))
      .def("wait", &ProductQueue::wait, py::arg("ticket"), py::call_guard<py::gil_scoped_release>())
      .def("completed", &ProductQueue::completed);
}

}  // namespace torchneuron::nki
