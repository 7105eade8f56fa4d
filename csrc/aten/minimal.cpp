// The kernels a device must provide itself: allocation, views that share
// device storage, resizing, and copies between devices. Everything else can
// run through the generic zero-copy path (generic_fallback.cpp).
#include <ATen/Context.h>
#include <ATen/EmptyTensor.h>
#include <ATen/core/op_registration/adaption.h>
#include <ATen/native/Resize.h>
#include <ATen/native/ResizeCommon.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_cpu_dispatch.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/view_native.h>
#include <torch/library.h>

#include "../backend/allocator.h"
#include "../runtime/device.h"
#include "../runtime/stream.h"
#include "../instrumentation/activity.h"
#include "host_view.h"
#include "numerics.h"
#include "unsupported_tensor_types.h"

namespace torchneuron {
namespace {

// These kernels are recorded in op tracking like every other device kernel
// (TorchNeuron's get_executed_ops() lists aten::empty, resize_, ...): one
// relaxed atomic add. Views are not: they are metadata and the hottest path.
#define NEURON_RECORD(op)                                                             \
  do {                                                                                \
    static OpCounter* counter_ = op_counter(op, "", ExecutionTier::kNative);          \
    counter_->increment();                                                            \
  } while (0)

// torch.use_deterministic_algorithms(True) with torch.utils.deterministic.fill_uninitialized_memory (its
// default): new memory holds NaN (floating types) or the integer maximum, as the CPU's and CUDA's empty and
// resize_ give, instead of the caching allocator's stale bytes.
bool deterministic_fill() {
  const auto& ctx = at::globalContext();
  return ctx.deterministicAlgorithms() && ctx.deterministicFillUninitializedMemory();
}

c10::DeviceIndex target_device(std::optional<c10::Device> device) {
  if (device.has_value() && device->has_index()) return device->index();
  return static_cast<c10::DeviceIndex>(neuron_rt::current_device());
}

// The options both allocating entry points refuse, with `op` named in the quantized message.
void check_empty_options(const char* op, std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<bool> pin_memory) {
  TORCH_CHECK(!pin_memory.value_or(false), "Only dense CPU tensors can be pinned; neuron tensors live in HBM.");
  TORCH_CHECK(layout.value_or(c10::kStrided) == c10::kStrided, "neuron supports only the strided layout, not ",
              layout.value());
  TORCH_CHECK_NOT_IMPLEMENTED(!c10::isQIntType(c10::dtype_or_default(dtype)), quantized_unsupported_message(op));
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> memory_format) {
  check_empty_options("aten::empty", dtype, layout, pin_memory);
  NEURON_RECORD("aten::empty.memory_format");
  CurrentDeviceScope scope(target_device(device));
  at::Tensor t = at::detail::empty_generic(size, device_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                           c10::dtype_or_default(dtype), memory_format);
  if (C10_UNLIKELY(numerics::trainium())) numerics::fill_uninitialized(t);
  if (C10_UNLIKELY(deterministic_fill())) at::native::fill_empty_deterministic_(t);
  return t;
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
                         std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                         std::optional<bool> pin_memory) {
  check_empty_options("aten::empty_strided", dtype, layout, pin_memory);
  NEURON_RECORD("aten::empty_strided");
  CurrentDeviceScope scope(target_device(device));
  at::Tensor t = at::detail::empty_strided_generic(size, stride, device_allocator(),
                                                   c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                   c10::dtype_or_default(dtype));
  if (C10_UNLIKELY(numerics::trainium())) numerics::fill_uninitialized(t);
  if (C10_UNLIKELY(deterministic_fill())) at::native::fill_empty_deterministic_(t);
  return t;
}

at::Tensor as_strided(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
                      std::optional<int64_t> storage_offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}

at::Tensor view(const at::Tensor& self, c10::IntArrayRef size) { return at::native::view(self, size); }

at::Tensor reshape_alias(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  NEURON_RECORD("aten::resize_");
  CurrentDeviceScope scope(self.device().index());
  auto* impl = self.unsafeGetTensorImpl();
  const int64_t old_nbytes = impl->unsafe_storage() ? static_cast<int64_t>(impl->unsafe_storage().nbytes()) : 0;
  at::native::resize_impl_cpu_(impl, size, /*stride=*/std::nullopt);
  if (memory_format.has_value()) {
    TORCH_CHECK(*memory_format != c10::MemoryFormat::Preserve, "Unsupported memory format ", *memory_format);
    impl->empty_tensor_restride(*memory_format);
  }
  if (C10_UNLIKELY(deterministic_fill())) at::native::fill_resize_deterministic_(self, old_nbytes);
  return self;
}

at::Tensor& set_source_storage_offset(at::Tensor& self, c10::Storage source, int64_t storage_offset,
                                      c10::IntArrayRef size, c10::IntArrayRef stride) {
  NEURON_RECORD("aten::set_");
  CurrentDeviceScope scope(self.device().index());
  return at::native::set_storage_cpu_(self, std::move(source), storage_offset, size, stride);
}

// A neuron tensor's memory is neuron memory: set_ onto a CPU (or other
// device's) storage is refused before PyTorch's own storage check, with
// TorchNeuron's message ("set_: expected neuron ...") and what to do.
void check_set_source_device(c10::DeviceType type, const char* what, const c10::Device& device) {
  TORCH_CHECK(type == kNeuron, "set_: expected neuron ", what, ", but got ", what, " on device ", device,
              ": a neuron tensor can only be set to neuron memory; move the source to neuron first "
              "(source.to(\"neuron\"))");
}

at::Tensor& set_source_storage_checked(at::Tensor& self, c10::Storage source, int64_t storage_offset,
                                       c10::IntArrayRef size, c10::IntArrayRef stride) {
  check_set_source_device(source.device_type(), "storage", source.device());
  return set_source_storage_offset(self, std::move(source), storage_offset, size, stride);
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  check_set_source_device(source.device_type(), "storage", source.device());
  const int64_t numel = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_source_storage_offset(self, std::move(source), 0, {numel}, {});
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  check_set_source_device(source.device().type(), "source tensor", source.device());
  return set_source_storage_offset(self, source.storage(), source.storage_offset(), source.sizes(),
                                   source.strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0, device_allocator(), /*resizable=*/true);
  return set_source_storage_offset(self, std::move(empty), 0, {0}, {});
}

// Every combination of CPU and neuron memory is host memory here, so each
// copy is one host copy over zero-copy views: dtype conversion, broadcasting
// and strides are handled by the CPU copy kernel.
neuron_rt::CopyKind copy_kind(const at::Tensor& src, const at::Tensor& dst) {
  const bool s = src.device().type() == kNeuron, d = dst.device().type() == kNeuron;
  if (s && d) return neuron_rt::CopyKind::kDeviceToDevice;
  return s ? neuron_rt::CopyKind::kDeviceToHost : neuron_rt::CopyKind::kHostToDevice;
}

void record_copy(OpCounter* counter, uint32_t mode, int64_t start, const at::Tensor& src, const at::Tensor& dst) {
  const int64_t end = neuron_rt::now_ns();
  const int64_t read = static_cast<int64_t>(src.numel() * src.element_size());
  const int64_t written = static_cast<int64_t>(dst.numel() * dst.element_size());
  const neuron_rt::CopyKind kind = copy_kind(src, dst);
  if (kind != neuron_rt::CopyKind::kDeviceToDevice) {
    counter->host_transfer_calls.fetch_add(1, std::memory_order_relaxed);
    counter->host_transfer_read.fetch_add(read, std::memory_order_relaxed);
    counter->host_transfer_written.fetch_add(written, std::memory_order_relaxed);
  }
  Activity a = Activity::span(src.device().type() == kNeuron ? src.device().index() : dst.device().index(), start, end);
  a.kind = neuron_rt::TraceKind::kMemcpy;
  a.copy = kind;
  a.dst_device = dst.device().type() == kNeuron ? dst.device().index() : -1;
  a.bytes_read = read;
  a.bytes_written = written;
  a.elements = dst.numel();
  a.dtype = static_cast<int8_t>(dst.scalar_type());
  a.child_of_region = false;  // a copy is timed on its own counter, inside compiled regions too
  record_activity(counter, a, mode);
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool /*non_blocking*/) {
  static OpCounter* counter = op_counter("aten::_copy_from", "", ExecutionTier::kNative);
  counter->increment();
  const uint32_t mode = neuron_rt::timing_mode();
  const int64_t start = mode != 0 ? neuron_rt::now_ns() : 0;
  auto host_or_neuron = [](const at::Tensor& t) {
    return t.device().type() == kNeuron || t.device().type() == c10::DeviceType::CPU;
  };
  TORCH_CHECK(host_or_neuron(self) && host_or_neuron(dst),
              "neuron can copy only to and from CPU and neuron tensors, not from ", self.device(), " to ",
              dst.device());
  at::Tensor src_host = self.device().type() == kNeuron ? host_view(self) : self;
  at::Tensor dst_host = dst.device().type() == kNeuron ? host_view(dst) : dst;
  dst_host.copy_(src_host);
  if (C10_UNLIKELY(mode != 0)) record_copy(counter, mode, start, self, dst);
  return dst;
}

// TorchNeuron's semantics (its CopyKernel.cpp): a CPU source into a neuron
// destination only, and the destination is resized only when it is empty;
// otherwise the sizes must already agree. (PyTorch's CPU fallback, the caller
// this operator exists for, copies host results back into neuron outputs.)
at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  TORCH_CHECK(dst.defined(), "_copy_from_and_resize: dst is undefined");
  TORCH_CHECK(self.defined(), "_copy_from_and_resize: self (the source) is undefined");
  TORCH_CHECK(self.device().type() == c10::DeviceType::CPU && dst.device().type() == kNeuron,
              "_copy_from_and_resize now only support copy from cpu tensor to neuron tensor, but got src tensor "
              "device is ", self.device(), " and dst device is ", dst.device(),
              ": use dst.copy_(src) (after dst.resize_(src.shape) if needed) for other copies");
  NEURON_RECORD("aten::_copy_from_and_resize");
  if (dst.numel() == 0) resize_(dst, self.sizes(), std::nullopt);
  TORCH_CHECK(self.sizes() == dst.sizes(),
              "_copy_from_and_resize now only support copy with same size, or dst.numel() == 0! Got src size ",
              self.sizes(), " and dst size ", dst.sizes(), ": resize dst first (dst.resize_(src.shape)) or pass an "
              "empty dst");
  return copy_from(self, dst, false);
}

// Module.to, Tensor.data = and load_state_dict keep Parameter objects (and so tied
// weights and optimizers built before a move) only when this answers true:
// PyTorch's built-in rule knows CPU and CUDA but not PrivateUse1, and points
// PrivateUse1 backends here. Dense strided CPU and neuron tensors share one
// TensorImpl type, so a shallow copy between them is as sound as CPU <-> CUDA.
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  NEURON_RECORD("aten::_has_compatible_shallow_copy_type");
  constexpr auto dense = c10::DispatchKeySet(c10::DispatchKey::Dense);
  constexpr auto host_backends =
      c10::DispatchKeySet({c10::BackendComponent::CPUBit, c10::BackendComponent::PrivateUse1Bit});
  auto is_host_dense = [&](c10::DispatchKeySet ks) { return ks.has_any(dense) && ks.has_any(host_backends); };
  if (is_host_dense(self.key_set()) && is_host_dense(from.key_set())) return true;
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set());
}

// Kernels run synchronously, so no block can be reused while a stream still
// reads it; recording the use is all the allocator needs.
void record_stream(at::Tensor& self, c10::Stream stream) {
  TORCH_CHECK(stream.device_type() == kNeuron, "record_stream: expected a neuron stream, got one on ",
              stream.device());
  device_allocator()->recordStream(self.storage().data_ptr(), stream);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("as_strided", as_strided);
  m.impl("view", view);
  m.impl("_reshape_alias", reshape_alias);
  m.impl("resize_", resize_);
  m.impl("set_.source_Storage", set_source_storage);
  m.impl("set_.source_Storage_storage_offset", set_source_storage_checked);
  m.impl("set_.source_Tensor", set_source_tensor);
  m.impl("set_", set_empty);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("record_stream", record_stream);
  m.impl("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type);
}

// A conj/neg-bit source must reach copy_from as it is: the CPU copy kernel
// resolves the bits itself. Materializing them first (the Conjugate/Negative
// fallbacks) would clone, which copies, which calls _copy_from again.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

}  // namespace torchneuron
