// Nested (strided-layout) tensors on neuron. PyTorch registers its nested
// kernels for NestedTensorCPU / NestedTensorCUDA only, yet most of them are
// host computations over the nested tensor's one buffer and its size/stride/
// offset metadata (CPU tensors on every device). Here:
//  - _to_copy (moving to and from neuron) is PyTorch's device-generic nested
//    copy (_to_copy_nested: copy the buffer, keep the metadata);
//  - every other nested operator runs its NestedTensorCPU kernel on nested
//    host views (the same metadata over a zero-copy CPU view of the buffer),
//    with allocations from the core's HBM; results become neuron tensors
//    without a copy, and results that alias an input (views, in-place) become
//    views of that input's device storage. Counted in the generic tier.
// This is what TransformerEncoderLayer's fast path
// (_transformer_encoder_layer_fwd on a nested input in eval / no_grad) needs.
#include <ATen/NestedTensorImpl.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/nested/NestedTensorUtils.h>
#include <ATen/ops/_to_copy_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/empty_like_native.h>
#include <torch/library.h>

#include <vector>

#include "../backend/allocator.h"
#include "host_view.h"
#include "kernel_wrapper.h"
#include "../instrumentation/op_tracking.h"

namespace torchneuron {
namespace {

bool is_neuron(const at::Tensor& t) { return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1; }

// The bytes a tensor's values live in, as a tensor: a nested tensor's whole
// buffer (also when the nested tensor is a non-contiguous view of it).
at::Tensor data_of(const at::Tensor& t) {
  return t.is_nested() ? at::native::get_nested_tensor_impl(t)->get_unsafe_storage_as_tensor() : t;
}

// The same nested metadata over another buffer.
at::Tensor rewrap(const at::Tensor& nested, const at::Tensor& buffer) {
  const auto* impl = at::native::get_nested_tensor_impl(nested);
  return at::native::wrap_buffer(buffer, impl->get_nested_sizes(), impl->get_nested_strides(),
                                 impl->get_storage_offsets());
}

struct Input {
  at::Tensor device;     // the caller's tensor
  at::Tensor host;       // what the host kernel gets
  at::Tensor host_data;  // the host view of its bytes
};

[[noreturn]] void mixed_devices(const c10::OperatorHandle& op, const at::Tensor& neuron, const at::Tensor& other) {
  const auto& name = op.schema().operator_name();
  raise_mixed_devices(neuron.device(), other.device(),
                      name.overload_name.empty() ? name.name : name.name + "." + name.overload_name);
}

at::Tensor to_device(const at::Tensor& r, const std::vector<Input>& inputs, c10::DeviceIndex device) {
  if (!r.defined() || r.device().type() != c10::DeviceType::CPU) return r;
  for (const Input& in : inputs)
    if (r.unsafeGetTensorImpl() == in.host.unsafeGetTensorImpl()) return in.device;  // returned self
  const at::Tensor data = data_of(r);
  at::Tensor device_data;
  for (const Input& in : inputs) {
    if (data.storage().is_alias_of(in.host_data.storage())) {
      const at::Tensor base = data_of(in.device);
      device_data = device_view_like(data, base.storage(), base);
      break;
    }
  }
  if (!device_data.defined()) device_data = adopt_host_tensor(data, device);
  return r.is_nested() ? rewrap(r, device_data) : device_data;
}

void nested_on_host(const c10::OperatorHandle& op, c10::DispatchKeySet /*ks*/, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  record_generic(schema.operator_name());
  const size_t n = schema.arguments().size(), base = stack->size() - n;
  std::vector<Input> inputs;
  at::Tensor first;  // the first neuron tensor argument: its device runs the kernel
  for (size_t i = base; i < stack->size() && !first.defined(); ++i) {
    const c10::IValue& v = (*stack)[i];
    if (v.isTensor() && is_neuron(v.toTensor())) first = v.toTensor();
    if (v.isTensorList())
      for (const at::Tensor& t : v.toTensorList())
        if (!first.defined() && is_neuron(t)) first = t;
  }
  TORCH_INTERNAL_ASSERT(first.defined(), "nested_on_host: ", schema.name(), " reached neuron without a neuron tensor");
  auto convert = [&](const at::Tensor& t) -> at::Tensor {
    if (!t.defined()) return t;
    if (!is_neuron(t)) {
      // 0-dim CPU tensors mix in as scalars, as in every neuron kernel
      if (t.is_nested() || t.dim() > 0) mixed_devices(op, first, t);
      return t;
    }
    if (t.device() != first.device()) mixed_devices(op, first, t);
    const at::Tensor host_data = host_view(data_of(t));
    at::Tensor host = t.is_nested() ? rewrap(t, host_data) : host_view(t);
    inputs.push_back({t, host, host_data});
    return host;
  };
  const c10::DeviceIndex device = first.device().index();
  for (size_t i = base; i < stack->size(); ++i) {
    c10::IValue& v = (*stack)[i];
    if (v.isTensor()) {
      v = convert(v.toTensor());
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> list = v.toTensorList();
      for (size_t j = 0; j < list.size(); ++j) list.set(j, convert(list.get(j)));
    } else if (v.isDevice() && v.toDevice().type() == c10::DeviceType::PrivateUse1) {
      v = c10::IValue(c10::Device(c10::DeviceType::CPU));
    }
  }
  CurrentDeviceScope scope(device);
  {
    KernelAllocationScope alloc;
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::NestedTensorCPU), stack);
  }
  const size_t m = schema.returns().size(), out = stack->size() - m;
  for (size_t i = out; i < stack->size(); ++i) {
    c10::IValue& v = (*stack)[i];
    if (v.isTensor()) {
      at::Tensor t = v.toTensor();
      v = c10::IValue();  // a fresh buffer is then uniquely owned and adopted without a copy
      v = to_device(t, inputs, device);
    } else if (v.isTensorList()) {
      std::vector<at::Tensor> items = v.toTensorVector();
      v = c10::IValue();
      for (auto& t : items) t = to_device(t, inputs, device);
      v = c10::IValue(c10::List<at::Tensor>(items));
    }
  }
}

}  // namespace
}  // namespace torchneuron

// Device-generic nested kernels (they work on the buffer with ordinary ops):
// the copies between devices, and allocation.
TORCH_LIBRARY_IMPL(aten, NestedTensorPrivateUse1, m) {
  m.impl("_to_copy", TORCH_FN(at::native::_to_copy_nested));
  m.impl("copy_", TORCH_FN(at::native::copy_nested_));
  m.impl("empty_like", TORCH_FN(at::native::empty_like_nested));
  m.impl("clone", TORCH_FN(at::native::clone_nested));
}

TORCH_LIBRARY_IMPL(_, NestedTensorPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&torchneuron::nested_on_host>());
}
