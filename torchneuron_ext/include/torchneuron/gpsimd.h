// The GPSIMD programming helpers of Neuron's custom C++ operators, emulated
// on the host: element accessors (PyTorch's own `t.accessor<T, N>()`),
// streaming accessors, the TCM pool and its accessor, get_dst_tensor(), and
// the multicore queries get_cpu_id() / get_cpu_count(). Kernels written for
// Neuron compile unchanged; the limits that matter for correctness on the
// hardware (the 16 KiB TCM budget, single-core-only stream accessors, stream
// coherence) are enforced with errors that say what to change.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include <torchneuron/detail/coherence_policy.h>
#include <torchneuron/detail/core_state.h>
#include <torchneuron/detail/flat_copy.h>

namespace torchneuron::gpsimd {

// What the read and the write stream accessor share: the tensor, the stream's
// registration with the running kernel, its TCM buffer (one element when TCM
// is exhausted), and their ownership. Moving hands the buffer over; closing
// (release(), also on destruction) writes back a write stream's pending
// elements and gives the buffer back. Both accessors are movable, not copyable.
template <typename T>
class StreamAccessorState {
 protected:
  StreamAccessorState(const at::Tensor& t, const char* api, const char* api_call, bool write)
      : tensor_(t), write_(write) {
    auto& core = current_core(api_call);
    TORCH_CHECK(!core.call->multicore(), api_call, " in kernel ", core.call->kernel(),
                ": stream accessors work in single-core kernels only; a multicore kernel must use tcm_accessor()");
    check_element_type<T>(t, api);
    call_ = core.call;
    tcm_ = core.tcm;
    call_->open_stream(tensor_, write_);
    numel_ = static_cast<size_t>(t.numel());
    void* buffer = tcm_->allocate(kStreamBufferBytes);
    buffer_ = buffer != nullptr ? static_cast<T*>(buffer) : &single_;
    capacity_ = buffer != nullptr ? kStreamBufferBytes / sizeof(T) : 1;
    open_ = true;
  }
  StreamAccessorState(StreamAccessorState&& other) noexcept { take_state(other); }
  StreamAccessorState& operator=(StreamAccessorState&& other) noexcept {
    if (this != &other) {
      release();
      take_state(other);
    }
    return *this;
  }
  StreamAccessorState(const StreamAccessorState&) = delete;
  StreamAccessorState& operator=(const StreamAccessorState&) = delete;
  ~StreamAccessorState() { release(); }

  void release() noexcept {
    if (!open_) return;
    if (write_) flush();
    open_ = false;
    if (buffer_ != &single_) tcm_->release(buffer_);
    call_->close_stream(tensor_, write_);
  }
  // A write stream's buffered elements, written back.
  void flush() noexcept {
    if (pending_ == 0) return;
    copy_to_tensor(tensor_, position_, pending_, buffer_);
    position_ += pending_;
    pending_ = 0;
  }

  at::Tensor tensor_;
  OpCall* call_ = nullptr;
  TcmArena* tcm_ = nullptr;
  T single_{};
  T* buffer_ = nullptr;
  size_t capacity_ = 0, numel_ = 0, position_ = 0;
  size_t filled_ = 0, next_ = 0;  // read: the elements in the buffer, and the next one to hand out
  size_t pending_ = 0;            // write: the elements buffered since the last write-back
  bool write_ = false;
  bool open_ = false;

 private:
  void take_state(StreamAccessorState& o) noexcept {
    tensor_ = std::move(o.tensor_);
    call_ = o.call_;
    tcm_ = o.tcm_;
    single_ = o.single_;
    buffer_ = o.buffer_ == &o.single_ ? &single_ : o.buffer_;
    capacity_ = o.capacity_;
    numel_ = o.numel_;
    position_ = o.position_;
    filled_ = o.filled_;
    next_ = o.next_;
    pending_ = o.pending_;
    write_ = o.write_;
    open_ = o.open_;
    o.open_ = false;
  }
};

}  // namespace torchneuron::gpsimd

namespace torch {

// Sequential reads of a tensor's elements (flattened, row-major) through a
// 4 KiB TCM buffer; without TCM left it reads element by element. Single-core
// kernels only. Obtain with `t.read_stream_accessor<T>()`. Movable, not
// copyable; closed on destruction.
template <typename T>
class TensorReadStreamAccessor : private ::torchneuron::gpsimd::StreamAccessorState<T> {
  using State = ::torchneuron::gpsimd::StreamAccessorState<T>;
  using State::buffer_, State::capacity_, State::filled_, State::next_, State::numel_, State::open_,
      State::position_, State::tensor_;

 public:
  explicit TensorReadStreamAccessor(const at::Tensor& t)
      : State(t, "read_stream_accessor", "read_stream_accessor()", /*write=*/false) {}

  // The next element.
  T read() {
    if (C10_UNLIKELY(next_ == filled_)) refill();
    return buffer_[next_++];
  }

  // Closes the stream and returns its TCM buffer (also done on destruction).
  int close() {
    this->release();
    return 0;
  }

 private:
  void refill() {
    TORCH_CHECK(open_, "read() on a closed read stream accessor");
    TORCH_CHECK(position_ < numel_, "read() past the end of a read stream: the tensor has ", numel_, " elements");
    const size_t n = std::min(capacity_, numel_ - position_);
    ::torchneuron::gpsimd::copy_from_tensor(tensor_, position_, n, buffer_);
    position_ += n;
    filled_ = n;
    next_ = 0;
  }
};

// Sequential writes of a tensor's elements (flattened, row-major) through a
// 4 KiB TCM buffer, written back when full and on close() or destruction.
// Single-core kernels only. Obtain with `t.write_stream_accessor<T>()`.
// Movable, not copyable.
template <typename T>
class TensorWriteStreamAccessor : private ::torchneuron::gpsimd::StreamAccessorState<T> {
  using State = ::torchneuron::gpsimd::StreamAccessorState<T>;
  using State::buffer_, State::capacity_, State::numel_, State::open_, State::pending_, State::position_;

 public:
  explicit TensorWriteStreamAccessor(const at::Tensor& t)
      : State(t, "write_stream_accessor", "write_stream_accessor()", /*write=*/true) {}

  // Appends the next element.
  void write(T value) {
    if (C10_UNLIKELY(pending_ == capacity_ || position_ + pending_ >= numel_)) make_room();
    buffer_[pending_++] = value;
  }

  // Writes back what is buffered and closes the stream.
  int close() {
    this->release();
    return 0;
  }

 private:
  void make_room() {
    TORCH_CHECK(open_, "write() on a closed write stream accessor");
    TORCH_CHECK(position_ + pending_ < numel_, "write() past the end of a write stream: the tensor has ", numel_,
                " elements");
    this->flush();
  }
};

// Block copies between a tensor (flattened, row-major) and TCM buffers from
// torch::neuron::tcm_malloc. The one accessor multicore kernels may use.
// Obtain with `t.tcm_accessor()`: read-only from a const tensor.
template <bool read_only>
class TensorTcmAccessor {
 public:
  explicit TensorTcmAccessor(const at::Tensor& t) : tensor_(t) {
    ::torchneuron::gpsimd::current_core("tcm_accessor()");
    TORCH_CHECK(t.defined(), "tcm_accessor() on an undefined tensor");
  }

  // Copies num_elem elements from the tensor, from flat index tensor_offset.
  template <typename T>
  void tensor_to_tcm(T* tcm_ptr, size_t tensor_offset, size_t num_elem) const {
    check(tcm_ptr, tensor_offset, num_elem, "tensor_to_tcm");
    ::torchneuron::gpsimd::copy_from_tensor(tensor_, tensor_offset, num_elem, tcm_ptr);
  }

  // Copies num_elem elements into the tensor, from flat index tensor_offset.
  template <typename T>
  void tcm_to_tensor(T* tcm_ptr, size_t tensor_offset, size_t num_elem) const {
    static_assert(!read_only,
                  "tcm_to_tensor writes the tensor, but this TensorTcmAccessor is read-only: it came from a const "
                  "tensor (take tcm_accessor() of a non-const torch::Tensor, e.g. get_dst_tensor())");
    check(tcm_ptr, tensor_offset, num_elem, "tcm_to_tensor");
    ::torchneuron::gpsimd::copy_to_tensor(tensor_, tensor_offset, num_elem, tcm_ptr);
  }

 private:
  template <typename T>
  void check(const T* tcm_ptr, size_t offset, size_t n, const char* api) const {
    ::torchneuron::gpsimd::check_element_type<T>(tensor_, api);
    const size_t numel = static_cast<size_t>(tensor_.numel());
    TORCH_CHECK(offset <= numel && n <= numel - offset, api, ": elements [", offset, ", ", offset + n,
                ") are outside the tensor's ", numel, " elements");
    auto& core = ::torchneuron::gpsimd::current_core(api);
    TORCH_CHECK(n == 0 || core.tcm->contains(tcm_ptr, n * sizeof(T)), api, ": ", n * sizeof(T),
                " bytes at the TCM pointer are not inside one block from torch::neuron::tcm_malloc on this core (",
                "TCM holds ", ::torchneuron::gpsimd::kTcmBytes, " bytes per GPSIMD core)");
  }

  at::Tensor tensor_;
};

namespace neuron {

// Allocates nbytes of the current core's 16 KiB TCM; nullptr when it does not fit.
inline void* tcm_malloc(size_t nbytes) {
  return ::torchneuron::gpsimd::current_core("torch::neuron::tcm_malloc()").tcm->allocate(nbytes);
}

// Returns a block from tcm_malloc to the pool (nullptr is ignored).
inline void tcm_free(void* ptr) {
  if (ptr == nullptr) return;
  auto& core = ::torchneuron::gpsimd::current_core("torch::neuron::tcm_free()");
  TORCH_CHECK(core.tcm->release(ptr), "torch::neuron::tcm_free(", ptr,
              "): not a block from torch::neuron::tcm_malloc on this core, or already freed");
}

}  // namespace neuron
}  // namespace torch

// The op's output tensor, to be written in place (required in multicore
// kernels, optional in single-core ones). Once called, the tensor the kernel
// returns is ignored and this one is the op's result.
inline at::Tensor get_dst_tensor() { return ::torchneuron::gpsimd::current_core("get_dst_tensor()").call->dst(); }

// This GPSIMD core's id, in [0, get_cpu_count()).
inline uint32_t get_cpu_id() { return ::torchneuron::gpsimd::current_core("get_cpu_id()").cpu_id; }

// How many GPSIMD cores run the kernel: 8 for libraries built with
// multicore=True, else 1.
inline uint32_t get_cpu_count() { return ::torchneuron::gpsimd::current_core("get_cpu_count()").cpu_count; }

namespace torchneuron::gpsimd {

// The accessors as free functions, for code that does not use the methods.
template <typename T>
torch::TensorReadStreamAccessor<T> read_stream_accessor(const at::Tensor& t) {
  return torch::TensorReadStreamAccessor<T>(t);
}
template <typename T>
torch::TensorWriteStreamAccessor<T> write_stream_accessor(at::Tensor& t) {
  return torch::TensorWriteStreamAccessor<T>(t);
}
inline torch::TensorTcmAccessor<true> tcm_accessor(const at::Tensor& t) { return torch::TensorTcmAccessor<true>(t); }
inline torch::TensorTcmAccessor<false> tcm_accessor(at::Tensor& t) { return torch::TensorTcmAccessor<false>(t); }

}  // namespace torchneuron::gpsimd

#ifdef TORCHNEURON_TENSOR_HAS_GPSIMD_METHODS
template <typename T>
inline ::torch::TensorReadStreamAccessor<T> at::Tensor::read_stream_accessor() const& {
  return ::torch::TensorReadStreamAccessor<T>(*this);
}
template <typename T>
inline ::torch::TensorWriteStreamAccessor<T> at::Tensor::write_stream_accessor() & {
  return ::torch::TensorWriteStreamAccessor<T>(*this);
}
inline ::torch::TensorTcmAccessor<true> at::Tensor::tcm_accessor() const& {
  return ::torch::TensorTcmAccessor<true>(*this);
}
inline ::torch::TensorTcmAccessor<false> at::Tensor::tcm_accessor() & {
  return ::torch::TensorTcmAccessor<false>(*this);
}
inline ::torch::CoherencyEnforcer::Policy at::Tensor::get_accessor_coherence_policy() const {
  return ::torchneuron::gpsimd::current_core("get_accessor_coherence_policy()").call->policy(*this);
}
inline void at::Tensor::set_accessor_coherence_policy(::torch::CoherencyEnforcer::Policy policy) const {
  ::torchneuron::gpsimd::current_core("set_accessor_coherence_policy()").call->set_policy(*this, policy);
}
#endif
