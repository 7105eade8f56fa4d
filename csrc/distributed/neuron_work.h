// The Work a neuron collective returns: it wraps the transport's (gloo's)
// Work, keeps the neuron tensors alive while the transport writes through
// their host views, finishes reductions gloo lacks (AVG), records the
// collective as a device activity, and turns transport failures into errors
// that say which collective failed and why.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace torchneuron {
struct OpCounter;
}

namespace torchneuron::distributed {

// What the profiler and the per-op timing learn about one collective.
struct CollectiveEvent {
  OpCounter* counter = nullptr;  // "c10d::<op>", tier collective
  int device = 0;
  int64_t stream = 0;
  uint64_t correlation = 0;
  uint32_t timing_mode = 0;      // captured at launch: 0 = record nothing
  int64_t launch_start = 0, launch_end = 0;
  int64_t bytes_read = 0, bytes_written = 0;
  int group_size = 1;            // ranks in the process group
  void finish(int64_t end_ns) const;
};

class NeuronWork final : public c10d::Work {
 public:
  // `finalize` runs once the transport is done and before anyone sees the
  // result (e.g. the division of an average). `keep_alive` holds every
  // tensor whose memory the transport touches.
  NeuronWork(c10::intrusive_ptr<c10d::Work> inner, std::vector<at::Tensor> outputs,
             std::vector<at::Tensor> keep_alive, std::function<void()> finalize, CollectiveEvent event,
             std::string description, int rank, c10d::OpType op_type, bool try_future);
  ~NeuronWork() override;

  // False when the transport's Work has no future (gloo's point-to-point and
  // some list-form collectives): the backend then holds this Work until done.
  bool has_future() const { return future_ != nullptr; }

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override {}
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void abort() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  void finish_without_future();
  [[noreturn]] void rethrow(const std::exception_ptr& e) const;

  // What the transport's completion callback uses. The Work owns it, never the callback: the callback runs on
  // (and is destroyed by) a transport thread, and a tensor whose last reference that thread dropped would
  // need the GIL to release its Python object, which a thread cannot take once the interpreter is
  // finalizing (it exits through a noexcept destructor: "terminate called without an active exception").
  struct Completion;
  struct Handoff;

  c10::intrusive_ptr<c10d::Work> inner_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;  // null when the transport's Work has none
  std::shared_ptr<Completion> completion_;           // with a future
  std::shared_ptr<Handoff> handoff_;                 // shared with the callback: no tensors unless orphaned
  // Only without a future.
  std::vector<at::Tensor> keep_alive_;
  std::function<void()> finalize_;
  std::mutex mu_;
  CollectiveEvent event_;
  std::string description_;
  bool finished_ = false;
};

// Wraps a transport failure: which collective, on which rank, and what to check.
std::string describe_failure(const std::string& description, const std::string& transport_message);

}  // namespace torchneuron::distributed
