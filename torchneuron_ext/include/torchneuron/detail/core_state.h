// The state a custom-op kernel sees while it runs: which launch it belongs to
// (its output buffer for get_dst_tensor(), the stream accessors open on each
// tensor), and which GPSIMD core it runs on (id, count, that core's TCM).
// Kernels reach it through thread-local storage, as device code reaches the
// core it runs on; the executor (op_executor.h) sets it up per launch.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <torchneuron/detail/coherence_policy.h>
#include <torchneuron/detail/tcm_arena.h>

namespace torchneuron::gpsimd {

inline constexpr uint32_t kNumCores = 8;

// What the shape function says an output is.
struct OutputSpec {
  std::vector<int64_t> sizes;
  at::ScalarType dtype;
};

// One launch of a custom op.
class OpCall {
 public:
  OpCall(const char* op, const char* kernel, bool multicore, const std::vector<OutputSpec>& outputs)
      : op_(op), kernel_(kernel), multicore_(multicore), outputs_(outputs) {}
  OpCall(const OpCall&) = delete;
  OpCall& operator=(const OpCall&) = delete;

  const char* op() const { return op_; }
  const char* kernel() const { return kernel_; }
  bool multicore() const { return multicore_; }

  // get_dst_tensor(): the op's output buffer, allocated from the shape
  // function's answer. Multicore launches allocate it before the cores start.
  at::Tensor dst() {
    TORCH_CHECK(outputs_.size() == 1, "get_dst_tensor() in kernel ", kernel_, " of ", op_,
                ": the op returns ", outputs_.size(), " tensors; get_dst_tensor() is for ops with one output");
    std::lock_guard<std::mutex> lock(mu_);
    if (!dst_.defined()) dst_ = allocate(outputs_[0]);
    dst_used_.store(true, std::memory_order_relaxed);
    return dst_;
  }
  void allocate_dst() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!dst_.defined() && outputs_.size() == 1) dst_ = allocate(outputs_[0]);
  }
  bool dst_used() const { return dst_used_.load(std::memory_order_relaxed); }
  const at::Tensor& dst_tensor() const { return dst_; }

  // ---- stream accessor coherence, per tensor storage ------------------------
  void open_stream(const at::Tensor& t, bool write) {
    std::lock_guard<std::mutex> lock(mu_);
    Track& tr = tracks_[key(t)];
    const bool conflict = write ? (tr.readers + tr.writers > 0) : (tr.writers > 0);
    if (conflict) report_incoherence(tr, write);
    ++(write ? tr.writers : tr.readers);
  }
  void close_stream(const at::Tensor& t, bool write) noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = tracks_.find(key(t));
    if (it == tracks_.end()) return;
    int& n = write ? it->second.writers : it->second.readers;
    if (n > 0) --n;
  }
  torch::CoherencyEnforcer::Policy policy(const at::Tensor& t) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = tracks_.find(key(t));
    return it == tracks_.end() ? torch::CoherencyEnforcer::COHERENT : it->second.policy;
  }
  void set_policy(const at::Tensor& t, torch::CoherencyEnforcer::Policy p) {
    std::lock_guard<std::mutex> lock(mu_);
    tracks_[key(t)].policy = p;
  }

 private:
  struct Track {
    int readers = 0;
    int writers = 0;
    torch::CoherencyEnforcer::Policy policy = torch::CoherencyEnforcer::COHERENT;
  };
  static const void* key(const at::Tensor& t) {
    TORCH_CHECK(t.defined(), "stream accessor on an undefined tensor");
    return t.storage().unsafeGetStorageImpl();
  }
  static at::Tensor allocate(const OutputSpec& s) { return at::empty(s.sizes, at::TensorOptions().dtype(s.dtype)); }

  void report_incoherence(const Track& tr, bool write) const {
    const std::string what =
        write ? std::string("opening a write stream accessor on a tensor that already has ") +
                    (tr.writers > 0 ? "an open write stream accessor" : "open read stream accessors")
              : std::string("opening a read stream accessor on a tensor that has an open write stream accessor");
    switch (tr.policy) {
      case torch::CoherencyEnforcer::COHERENT:
        TORCH_CHECK(false, "kernel ", kernel_, " of ", op_, ": potentially incoherent access: ", what,
                    " (stream accessors cache data in TCM; close() the other accessor first, or allow it with "
                    "t.set_accessor_coherence_policy(torch::CoherencyEnforcer::INCOHERENT_VERBOSE or "
                    "INCOHERENT_QUIET))");
        break;
      case torch::CoherencyEnforcer::INCOHERENT_VERBOSE:
        TORCH_WARN("kernel ", kernel_, " of ", op_, ": potentially incoherent access: ", what);
        break;
      case torch::CoherencyEnforcer::INCOHERENT_QUIET:
        break;
    }
  }

  const char* op_;
  const char* kernel_;
  bool multicore_;
  const std::vector<OutputSpec>& outputs_;
  std::mutex mu_;
  at::Tensor dst_;
  std::atomic<bool> dst_used_{false};
  std::unordered_map<const void*, Track> tracks_;
};

// The GPSIMD core the current thread is running a kernel on.
struct CoreState {
  OpCall* call = nullptr;
  uint32_t cpu_id = 0;
  uint32_t cpu_count = 1;
  TcmArena* tcm = nullptr;
};

inline CoreState& this_core() {
  static thread_local CoreState state;
  return state;
}

// The running kernel's core; `api` names the helper for the error raised
// when no kernel is running.
inline CoreState& current_core(const char* api) {
  CoreState& s = this_core();
  TORCH_CHECK(s.call != nullptr, api,
              " is only available inside a custom op kernel while it runs (called through "
              "torch.ops.<namespace>.<op>)");
  return s;
}

// Makes the current thread GPSIMD core `id` of `count` for one launch. The
// core's TCM starts empty and is released when the kernel returns.
class CoreScope {
 public:
  CoreScope(OpCall& call, uint32_t id, uint32_t count) : saved_(this_core()) {
    // A kernel that launches another op on the same thread keeps its TCM.
    TcmArena* tcm;
    if (saved_.call == nullptr) {
      static thread_local TcmArena arena;
      tcm = &arena;
    } else {
      nested_ = std::make_unique<TcmArena>();
      tcm = nested_.get();
    }
    tcm->reset();
    this_core() = CoreState{&call, id, count, tcm};
  }
  ~CoreScope() {
    this_core().tcm->reset();
    this_core() = saved_;
  }
  CoreScope(const CoreScope&) = delete;
  CoreScope& operator=(const CoreScope&) = delete;

 private:
  CoreState saved_;
  std::unique_ptr<TcmArena> nested_;
};

}  // namespace torchneuron::gpsimd
