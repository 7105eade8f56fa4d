#include "neuron_work.h"

#include <c10/util/Exception.h>

#include "../instrumentation/activity.h"
#include "../runtime/device.h"

namespace torchneuron::distributed {

void CollectiveEvent::finish(int64_t end_ns) const {
  if (timing_mode == 0 || counter == nullptr) return;
  // Host: the launch; device: from the launch until the transport finished.
  Activity a = Activity::spans(device, launch_start, launch_end, launch_start, end_ns);
  a.stream = stream;  // both captured at launch: the work may finish on another thread
  a.correlation = correlation;
  a.bytes_read = bytes_read;
  a.bytes_written = bytes_written;
  a.group_size = group_size;
  a.child_of_region = false;
  record_activity(counter, a, timing_mode);
}

std::string describe_failure(const std::string& description, const std::string& transport_message) {
  return "neuron backend: " + description +
         " failed: " + transport_message +
         "\nA peer process may have exited or stopped calling collectives (the group's timeout, "
         "`init_process_group(timeout=...)`, bounds the wait). Check the other ranks' logs.";
}

namespace {

std::string message_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const c10::Error& err) {
    return err.what_without_backtrace();
  } catch (const std::exception& err) {
    return err.what();
  } catch (...) {
    return "unknown error";
  }
}

}  // namespace

// The callback's side of the handoff. In the usual case the Work is alive and owns the tensors: the callback
// borrows them, finishes, and tells a Work being destroyed meanwhile (which waits for that) that it holds
// nothing any more. A Work dropped before the transport finished leaves them to the callback ("orphaned"),
// so their memory outlives the transport's use of it; that case alone releases them on the transport's thread.
struct NeuronWork::Completion {
  std::vector<at::Tensor> keep_alive;
  std::function<void()> finalize;
  c10::List<at::Tensor> value;
  CollectiveEvent event;
  std::string description;
  c10::intrusive_ptr<c10::ivalue::Future> result;

  void complete(c10::ivalue::Future& parent) {
    if (parent.hasError()) {
      event.finish(neuron_rt::now_ns());
      try {
        C10_THROW_ERROR(DistBackendError, describe_failure(description, message_of(parent.exception_ptr())));
      } catch (...) {
        result->setError(std::current_exception());
      }
      return;
    }
    try {
      if (finalize) finalize();
    } catch (...) {
      event.finish(neuron_rt::now_ns());
      result->setError(std::current_exception());
      return;
    }
    event.finish(neuron_rt::now_ns());
    result->markCompleted(c10::IValue(value));
  }
};

struct NeuronWork::Handoff {
  enum Phase { kWaiting, kRunning, kDone, kOrphaned };
  std::mutex mu;
  std::condition_variable cv;
  Phase phase = kWaiting;
  std::weak_ptr<Completion> completion;
  std::shared_ptr<Completion> orphan;

  void run(c10::ivalue::Future& parent) {
    bool orphaned;
    {
      std::shared_ptr<Completion> c;
      {
        std::lock_guard<std::mutex> lock(mu);
        orphaned = phase == kOrphaned;
        if (orphaned) {
          c = std::move(orphan);
        } else {
          phase = kRunning;
          c = completion.lock();
        }
      }
      if (c) c->complete(parent);
    }  // everything borrowed is released here, before the Work may go
    if (orphaned) return;
    std::lock_guard<std::mutex> lock(mu);
    phase = kDone;
    cv.notify_all();
  }
};

NeuronWork::NeuronWork(c10::intrusive_ptr<c10d::Work> inner, std::vector<at::Tensor> outputs,
                       std::vector<at::Tensor> keep_alive, std::function<void()> finalize,
                       CollectiveEvent event, std::string description, int rank, c10d::OpType op_type,
                       bool try_future)
    : c10d::Work(rank, op_type),
      inner_(std::move(inner)),
      outputs_(std::move(outputs)),
      event_(event),
      description_(std::move(description)) {
  c10::intrusive_ptr<c10::ivalue::Future> inner_future;
  if (try_future) {
    try {
      inner_future = inner_->getFuture();
    } catch (const c10::Error&) {
      inner_future = nullptr;  // this gloo Work has none
    }
  }
  if (!inner_future) {
    keep_alive_ = std::move(keep_alive);
    finalize_ = std::move(finalize);
    return;
  }
  completion_ = std::make_shared<Completion>();
  completion_->keep_alive = std::move(keep_alive);
  completion_->finalize = std::move(finalize);
  completion_->value = c10::List<at::Tensor>(outputs_);
  completion_->event = event_;
  completion_->description = description_;
  completion_->result = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors());
  future_ = completion_->result;
  handoff_ = std::make_shared<Handoff>();
  handoff_->completion = completion_;
  inner_future->addCallback([handoff = handoff_](c10::ivalue::Future& parent) { handoff->run(parent); });
}

NeuronWork::~NeuronWork() {
  if (!handoff_) return;
  std::unique_lock<std::mutex> lock(handoff_->mu);
  if (handoff_->phase == Handoff::kWaiting) {
    handoff_->phase = Handoff::kOrphaned;
    handoff_->orphan = completion_;
    return;
  }
  // The callback is running: it borrows only what this Work still owns, so it needs nothing from this
  // thread (not the GIL) to finish; wait the few instructions until it has let go.
  handoff_->cv.wait(lock, [&] { return handoff_->phase == Handoff::kDone; });
}

bool NeuronWork::isCompleted() {
  if (future_) return future_->completed();
  const bool done = inner_->isCompleted();
  if (done) finish_without_future();
  return done;
}

bool NeuronWork::isSuccess() const {
  if (future_) return future_->completed() && !future_->hasError();
  return inner_->isSuccess();
}

std::exception_ptr NeuronWork::exception() const {
  if (future_) return future_->completed() && future_->hasError() ? future_->exception_ptr() : nullptr;
  return inner_->exception();
}

int NeuronWork::sourceRank() const { return inner_->sourceRank(); }

std::vector<at::Tensor> NeuronWork::result() { return outputs_; }

void NeuronWork::rethrow(const std::exception_ptr& e) const {
  try {
    std::rethrow_exception(e);
  } catch (const c10::DistBackendError&) {
    throw;
  } catch (...) {
    C10_THROW_ERROR(DistBackendError, describe_failure(description_, message_of(e)));
  }
}

bool NeuronWork::wait(std::chrono::milliseconds timeout) {
  if (!future_) {
    // Waited on already: gloo's coalesced works copy their result into the outputs again on each wait,
    // which would undo the finalize step (AVG's division) done after the first.
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) {
      if (auto e = inner_->exception()) rethrow(e);
      return true;
    }
  }
  try {
    // gloo enforces the group's timeout itself; a caller's shorter one is
    // honoured by the transport's wait.
    if (timeout != kNoTimeout || !future_) inner_->wait(timeout);
  } catch (...) {
    if (!future_) finish_without_future();
    rethrow(std::current_exception());
  }
  if (!future_) {
    finish_without_future();
    return true;
  }
  future_->wait();
  if (future_->hasError()) rethrow(future_->exception_ptr());
  return true;
}

void NeuronWork::abort() { inner_->abort(); }

c10::intrusive_ptr<c10::ivalue::Future> NeuronWork::getFuture() {
  if (future_) return future_;
  TORCH_CHECK(opType_ != c10d::OpType::SEND && opType_ != c10d::OpType::RECV &&
                  opType_ != c10d::OpType::RECVANYSOURCE,
              "neuron backend: ", description_, " has no future (point-to-point works, as in gloo); call wait()");
  // The transport gave this collective no future: complete one on the spot.
  wait();
  auto done = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors());
  done->markCompleted(c10::IValue(c10::List<at::Tensor>(outputs_)));
  return done;
}

void NeuronWork::finish_without_future() {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  finished_ = true;
  if (finalize_ && inner_->isSuccess()) finalize_();
  event_.finish(neuron_rt::now_ns());
  keep_alive_.clear();
}

}  // namespace torchneuron::distributed
