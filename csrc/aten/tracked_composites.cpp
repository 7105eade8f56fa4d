// Factories and composites that neuron runs through PyTorch's own composite
// kernel (empty + fill_, empty_like + copy_, ...), registered for neuron so
// op tracking names the operator the user called: TorchNeuron's
// get_executed_ops() lists aten::ones, aten::clone, aten::new_empty, as they
// are kernels of its own there. Each kernel is the composite itself
// (at::native::X, what the CompositeExplicitAutograd entry would run) after one
// relaxed atomic add; the parts it calls are recorded as before.
#include <ATen/ATen.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/full_like_native.h>
#include <ATen/ops/full_native.h>
#include <ATen/ops/new_empty_native.h>
#include <ATen/ops/new_full_native.h>
#include <ATen/ops/new_ones_native.h>
#include <ATen/ops/new_zeros_native.h>
#include <ATen/ops/ones_like_native.h>
#include <ATen/ops/ones_native.h>
#include <ATen/ops/scalar_tensor_native.h>
#include <ATen/ops/zeros_like_native.h>
#include <ATen/ops/zeros_native.h>
#include <torch/library.h>

#include "op_tracking.h"

namespace torchneuron {
namespace {

using OptDtype = std::optional<at::ScalarType>;
using OptLayout = std::optional<at::Layout>;
using OptDevice = std::optional<at::Device>;
using OptBool = std::optional<bool>;
using OptFormat = std::optional<at::MemoryFormat>;

// A *_like or new_* call on a neuron tensor may ask for another device
// (zeros_like(x, device="cpu")); only a result on neuron ran on neuron.
at::Tensor recorded(OpCounter* counter, at::Tensor result) {
  if (result.device().type() == c10::DeviceType::PrivateUse1) counter->increment();
  return result;
}

#define NEURON_COUNTER(op) \
  static OpCounter* counter = op_counter(op, "", ExecutionTier::kNative)

at::Tensor clone(const at::Tensor& self, OptFormat memory_format) {
  NEURON_COUNTER("aten::clone");
  counter->increment();
  return at::native::clone(self, memory_format);
}

at::Tensor& copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  NEURON_COUNTER("aten::copy_");
  counter->increment();
  return at::native::copy_(self, src, non_blocking);
}

at::Tensor ones(at::IntArrayRef size, OptDtype dtype, OptLayout layout, OptDevice device, OptBool pin_memory) {
  NEURON_COUNTER("aten::ones");
  counter->increment();
  return at::native::ones(size, dtype, layout, device, pin_memory);
}

at::Tensor zeros(c10::SymIntArrayRef size, OptDtype dtype, OptLayout layout, OptDevice device, OptBool pin_memory) {
  NEURON_COUNTER("aten::zeros");
  counter->increment();
  return at::native::zeros_symint(size, dtype, layout, device, pin_memory);
}

at::Tensor full(at::IntArrayRef size, const at::Scalar& fill_value, OptDtype dtype, OptLayout layout,
                OptDevice device, OptBool pin_memory) {
  NEURON_COUNTER("aten::full");
  counter->increment();
  return at::native::full(size, fill_value, dtype, layout, device, pin_memory);
}

at::Tensor scalar_tensor(const at::Scalar& s, OptDtype dtype, OptLayout layout, OptDevice device,
                         OptBool pin_memory) {
  NEURON_COUNTER("aten::scalar_tensor");
  counter->increment();
  return at::native::scalar_tensor(s, dtype, layout, device, pin_memory);
}

at::Tensor empty_like(const at::Tensor& self, OptDtype dtype, OptLayout layout, OptDevice device, OptBool pin_memory,
                      OptFormat memory_format) {
  NEURON_COUNTER("aten::empty_like");
  return recorded(counter, at::native::empty_like(self, dtype, layout, device, pin_memory, memory_format));
}

at::Tensor ones_like(const at::Tensor& self, OptDtype dtype, OptLayout layout, OptDevice device, OptBool pin_memory,
                     OptFormat memory_format) {
  NEURON_COUNTER("aten::ones_like");
  return recorded(counter, at::native::ones_like(self, dtype, layout, device, pin_memory, memory_format));
}

at::Tensor zeros_like(const at::Tensor& self, OptDtype dtype, OptLayout layout, OptDevice device, OptBool pin_memory,
                      OptFormat memory_format) {
  NEURON_COUNTER("aten::zeros_like");
  return recorded(counter, at::native::zeros_like(self, dtype, layout, device, pin_memory, memory_format));
}

at::Tensor full_like(const at::Tensor& self, const at::Scalar& fill_value, OptDtype dtype, OptLayout layout,
                     OptDevice device, OptBool pin_memory, OptFormat memory_format) {
  NEURON_COUNTER("aten::full_like");
  return recorded(counter,
                  at::native::full_like(self, fill_value, dtype, layout, device, pin_memory, memory_format));
}

at::Tensor new_empty(const at::Tensor& self, c10::SymIntArrayRef size, OptDtype dtype, OptLayout layout,
                     OptDevice device, OptBool pin_memory) {
  NEURON_COUNTER("aten::new_empty");
  return recorded(counter, at::native::new_empty_symint(self, size, dtype, layout, device, pin_memory));
}

at::Tensor new_zeros(const at::Tensor& self, at::IntArrayRef size, OptDtype dtype, OptLayout layout, OptDevice device,
                     OptBool pin_memory) {
  NEURON_COUNTER("aten::new_zeros");
  return recorded(counter, at::native::new_zeros(self, size, dtype, layout, device, pin_memory));
}

at::Tensor new_ones(const at::Tensor& self, at::IntArrayRef size, OptDtype dtype, OptLayout layout, OptDevice device,
                    OptBool pin_memory) {
  NEURON_COUNTER("aten::new_ones");
  return recorded(counter, at::native::new_ones(self, size, dtype, layout, device, pin_memory));
}

at::Tensor new_full(const at::Tensor& self, at::IntArrayRef size, const at::Scalar& fill_value, OptDtype dtype,
                    OptLayout layout, OptDevice device, OptBool pin_memory) {
  NEURON_COUNTER("aten::new_full");
  return recorded(counter, at::native::new_full(self, size, fill_value, dtype, layout, device, pin_memory));
}

}  // namespace
}  // namespace torchneuron

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("clone", TORCH_FN(torchneuron::clone));
  m.impl("copy_", TORCH_FN(torchneuron::copy_));
  m.impl("ones", TORCH_FN(torchneuron::ones));
  m.impl("zeros", TORCH_FN(torchneuron::zeros));
  m.impl("full", TORCH_FN(torchneuron::full));
  m.impl("scalar_tensor", TORCH_FN(torchneuron::scalar_tensor));
  m.impl("empty_like", TORCH_FN(torchneuron::empty_like));
  m.impl("ones_like", TORCH_FN(torchneuron::ones_like));
  m.impl("zeros_like", TORCH_FN(torchneuron::zeros_like));
  m.impl("full_like", TORCH_FN(torchneuron::full_like));
  m.impl("new_empty", TORCH_FN(torchneuron::new_empty));
  m.impl("new_zeros", TORCH_FN(torchneuron::new_zeros));
  m.impl("new_ones", TORCH_FN(torchneuron::new_ones));
  m.impl("new_full", TORCH_FN(torchneuron::new_full));
}
