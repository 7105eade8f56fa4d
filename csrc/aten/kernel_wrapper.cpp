#include "kernel_wrapper.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/StorageImpl.h>

#include <algorithm>
#include <cstring>

#include "../instrumentation/flops.h"
#include "unsupported_tensor_types.h"
#include "../runtime/device.h"
#include "../runtime/stream.h"

namespace torchneuron {
namespace {
constexpr size_t kAliasScanLimit = 16;
}  // namespace

bool allows_cpu_tensor_args(const char* name, const char* overload) {
  const std::string_view n(name);
  const std::string_view o(overload == nullptr ? "" : overload);
  return n == "aten::index" || n == "aten::index_put_" || n == "aten::_index_put_impl_" || n == "aten::index_put" ||
         n == "aten::_index_put_impl" || n == "aten::_unsafe_index" || n == "aten::_unsafe_index_put" ||
         n == "aten::_unsafe_masked_index" || n == "aten::_unsafe_masked_index_put_accumulate" ||
         (n == "aten::tensor_split" && o == "tensor_indices_or_sections");
}

bool needs_device_rng(const char* name, const char* overload) {
  auto op = c10::Dispatcher::singleton().findSchema({name, overload == nullptr ? "" : overload});
  if (!op.has_value() || !op->hasTag(at::Tag::nondeterministic_seeded)) return false;
  for (const auto& arg : op->schema().arguments()) {
    const auto& type = arg.type();
    if (type->kind() == c10::TypeKind::GeneratorType) return false;
    if (type->kind() == c10::TypeKind::OptionalType &&
        type->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::GeneratorType) {
      return false;
    }
  }
  return true;
}

void KernelCall::note_tensor(const at::Tensor& t, bool written) {
  if (!t.defined()) return;
  if (C10_UNLIKELY(written && numerics::trainium()) && numerics::narrowable(t.scalar_type())) {
    written_.push_back(t.unsafeGetTensorImpl());
  }
  ++tensors_noted_;
  if (C10_UNLIKELY(timing_ != 0)) noted_.push_back(&t);
  const c10::Device d = t.device();
  if (d.type() == kNeuron) {
    if (device_ < 0) {
      device_ = d.index();
    } else if (device_ != d.index()) {
      mismatch(c10::Device(kNeuron, device_), d);
    }
  } else if (d.type() == c10::DeviceType::CPU) {
    // 0-dim CPU tensors mix in as scalars, as on CUDA; a written one is an
    // out= (or in-place self) on the wrong device.
    if (written) {
      cpu_output_seen_ = true;
    } else if (t.dim() > 0) {
      cpu_tensor_seen_ = true;
    }
  } else {
    TORCH_CHECK(false, name_, ": got a tensor on ", d,
                "; the neuron device accepts neuron tensors, and CPU tensors only as 0-dim scalars.");
  }
}

c10::DeviceIndex KernelCall::resolve() {
  slots_.reserve(tensors_noted_);
  if (device_ < 0 && device_arg_.has_value()) {
    device_ = device_arg_->has_index() ? device_arg_->index() : static_cast<c10::DeviceIndex>(neuron_rt::current_device());
  }
  if (device_ < 0) device_ = static_cast<c10::DeviceIndex>(neuron_rt::current_device());
  if (C10_UNLIKELY(timing_ != 0)) {
    // Now, while every tensor noted_ points to is still the caller's: on the boxed path they are IValues on the
    // dispatcher's stack, which the kernel pops and overwrites with its results.
    if (flops_ < 0) flops_ = estimate_flops(name_, noted_);
    noted_.clear();
  }
  if (C10_UNLIKELY(cpu_output_seen_)) wrong_out_device();
  if (cpu_tensor_seen_ && !allows_cpu_tensor_args(name_, overload_)) {
    mismatch(c10::Device(kNeuron, device_), c10::Device(c10::DeviceType::CPU));
  }
  return device_;
}

// PyTorch's and CUDA's sentence, which libraries and PyTorch's tests match,
// with TorchNeuron's phrase ("... is on cpu device, expected neuron", which
// its users' tests match) inside the parenthesis.
void raise_mixed_devices(c10::Device expected, c10::Device found, const std::string& op) {
  const bool cpu = found.type() == c10::DeviceType::CPU;
  TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, ", expected,
              " and ", found, "! (when checking arguments for ", op, ": a ", cpu ? "non-scalar " : "", "tensor is on ",
              cpu ? "cpu" : found.str(), " device, expected ", cpu ? std::string("neuron") : expected.str(),
              "). Move them to one device first, e.g. with .to(\"", expected, "\").");
}

void KernelCall::mismatch(c10::Device a, c10::Device b) const {
  std::string op(name_);
  if (overload_ != nullptr && overload_[0] != '\0') op.append(".").append(overload_);
  raise_mixed_devices(a, b, op);
}

// CUDA's wording (structured kernels' output check), which PyTorch's tests match.
void KernelCall::wrong_out_device() const {
  TORCH_CHECK(false, "Expected out tensor to have device ", c10::Device(kNeuron, device_),
              ", but got out.device() = ", c10::Device(c10::DeviceType::CPU));
}

void KernelCall::wrong_generator() const {
  TORCH_CHECK(false, "Expected a 'neuron' device type for generator but found 'cpu' (in ", name_,
              "). Use torch.Generator(device=\"neuron\") for neuron tensors.");
}

at::Tensor KernelCall::remember(const at::Tensor& t, at::Tensor* mut) {
  TORCH_INTERNAL_ASSERT(slots_.size() < slots_.capacity(), name_, ": more tensor arguments than were noted");
  // Aliasing must be visible to the CPU kernel as it is on the device: one
  // tensor passed twice is one host view (TensorIterator's in-place and
  // overlap checks compare TensorImpls and storages), and views of one device
  // storage share one host storage. Long tensor lists (foreach) skip the scan.
  at::Tensor host, wide;
  if (slots_.size() <= kAliasScanLimit) {
    const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
    const c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
    for (const auto& s : slots_) {
      if (s.device.unsafeGetTensorImpl() == impl) {
        host = s.host;
        wide = s.wide;
        break;
      }
      if (!host.defined() && s.device.storage().unsafeGetStorageImpl() == storage) {
        host = host_view(t, (s.wide.defined() ? s.wide : s.host).storage());
      }
    }
  }
  if (!host.defined()) host = host_view(t);
  if (C10_UNLIKELY(numerics::trainium()) && !wide.defined() && numerics::narrowable(t.scalar_type()) &&
      numerics::narrows(name_)) {
    // The kernel sees what a NeuronCore computes on; the 64-bit view is kept
    // for writing results back (sync_narrowed).
    (t.scalar_type() == at::kDouble ? narrowed_double_ : narrowed_long_) = true;
    wide = std::move(host);
    host = numerics::narrow(wide);
  }
  slots_.push_back(Slot{t, mut, std::move(host), std::move(wide)});
  return slots_.back().host;
}

void KernelCall::sync_arguments() {
  // Every argument is converted by now, so the warning names all the call narrowed.
  if (C10_UNLIKELY(narrowed_double_ || narrowed_long_)) {
    numerics::warn_narrowed(name_, overload_, narrowed_double_, narrowed_long_);
  }
  for (auto& s : slots_) {
    if (C10_UNLIKELY(s.wide.defined())) {
      sync_narrowed(s);
      continue;
    }
    const at::Tensor& h = s.host;
    const at::Tensor& d = s.device;
    // Nested kernels write a nested argument's buffer in place; they cannot resize or restride it (and a
    // nested tensor has no sizes() to compare).
    if (C10_UNLIKELY(h.is_nested())) continue;
    const c10::StorageImpl* hs = h.storage().unsafeGetStorageImpl();
    const c10::StorageImpl* ds = d.storage().unsafeGetStorageImpl();
    if (hs->data() != ds->data() || hs->nbytes() != ds->nbytes() || h.sizes() != d.sizes() ||
        h.strides() != d.strides() || h.storage_offset() != d.storage_offset()) {
      sync_back(d, h);
    }
  }
}

// Only arguments the kernel may write go back: the others' 64-bit elements
// stay as they were (narrowing is what the kernel reads, not a store).
void KernelCall::sync_narrowed(Slot& s) {
  const c10::TensorImpl* impl = s.device.unsafeGetTensorImpl();
  const bool written =
      s.mutable_device != nullptr || std::find(written_.begin(), written_.end(), impl) != written_.end();
  if (!written) return;
  if (!s.host.is_nested() && s.host.sizes() != s.wide.sizes()) {  // an out= the kernel resized
    at::Tensor d = s.device;
    d.resize_(s.host.sizes());
    s.wide = host_view(d);
  }
  numerics::write_back(s.host, s.wide);
}

// A result of a call that narrowed its inputs: back to 64 bits as the host
// kernel would have returned it, in a buffer of its own (a view of a
// narrowed copy aliases nothing on the device).
at::Tensor KernelCall::narrowed_result(const at::Tensor& r) {
  numerics::warn_narrowed(name_, overload_, narrowed_double_, narrowed_long_);
  at::Tensor w = numerics::widen_result(r, narrowed_double_, narrowed_long_);
  if (w.unsafeGetTensorImpl() == r.unsafeGetTensorImpl()) {
    const c10::StorageImpl* storage = r.storage().unsafeGetStorageImpl();
    for (const auto& s : slots_) {
      if (s.host.storage().unsafeGetStorageImpl() != storage) continue;
      if (!s.wide.defined()) return device_view_like(r, s.device.storage(), s.device);
      w = r.clone();
      break;
    }
  }
  return adopt_host_tensor(w, device_);
}

at::Tensor KernelCall::to_device(const at::Tensor& r) {
  if (C10_UNLIKELY(timing_ != 0) && r.defined()) {
    bytes_written_ += static_cast<int64_t>(r.numel() * r.element_size());
    output_numel_ += r.numel();
  }
  if (!r.defined() || r.device().type() == kNeuron) return r;
  if (r._is_zerotensor()) return zero_tensor_on(r, device_);
  TORCH_CHECK_NOT_IMPLEMENTED(!r.is_quantized(), quantized_unsupported_message(name_));
  const c10::TensorImpl* impl = r.unsafeGetTensorImpl();
  const c10::StorageImpl* storage = r.storage().unsafeGetStorageImpl();
  for (const auto& s : slots_)
    if (s.host.unsafeGetTensorImpl() == impl) return s.device;
  if (C10_UNLIKELY(narrowed_double_ || narrowed_long_)) return narrowed_result(r);
  for (const auto& s : slots_)
    if (s.host.storage().unsafeGetStorageImpl() == storage) return device_view_like(r, s.device.storage(), s.device);
  return adopt_host_tensor(r, device_);
}

at::Tensor& KernelCall::to_device_ref(at::Tensor& r) {
  if (C10_UNLIKELY(timing_ != 0)) {
    bytes_written_ += static_cast<int64_t>(r.numel() * r.element_size());
    output_numel_ += r.numel();
  }
  for (auto& s : slots_)
    if (&s.host == &r && s.mutable_device != nullptr) return *s.mutable_device;
  // One host view may serve several arguments (aliasing): the written one.
  bool input = false;
  for (auto& s : slots_) {
    if (s.host.unsafeGetTensorImpl() == r.unsafeGetTensorImpl()) {
      if (s.mutable_device != nullptr) return *s.mutable_device;
      input = true;
    }
  }
  TORCH_INTERNAL_ASSERT(!input, name_, " returned a reference to an input it may not write");
  // A kernel returning a reference to something that is not one of our
  // arguments (a CPU argument it wrote): hand it back unchanged.
  return r;
}

// The call's times were stamped by the constructor and KernelSpan, its FLOPs taken in resolve(), and the
// bytes it wrote counted as its results were mapped (to_device, to_device_ref): here they become one activity.
void KernelCall::finish_timed(OpCounter* counter) {
  const int64_t host_end = neuron_rt::now_ns();
  if (kernel_end_ == 0) kernel_start_ = kernel_end_ = host_end;
  Activity a = Activity::spans(device_ < 0 ? 0 : device_, host_start_, host_end, kernel_start_, kernel_end_);
  a.elements = output_numel_;
  for (const auto& s : slots_) {
    const int64_t numel = s.host.numel();
    a.bytes_read += static_cast<int64_t>(numel * s.host.element_size());
    a.elements = std::max(a.elements, numel);
  }
  a.bytes_written = bytes_written_;
  a.flops = std::max<int64_t>(flops_, 0);
  // From an owned slot: the kernel has replaced a boxed call's arguments on the stack with its results.
  a.dtype = slots_.empty() ? int8_t{-1} : static_cast<int8_t>(slots_[0].host.scalar_type());
  record_activity(counter, a, timing_);
}

}  // namespace torchneuron
