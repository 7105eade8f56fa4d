// Factories and composites that neuron runs through PyTorch's own composite
// kernel (empty + fill_, empty_like + copy_, ...), registered for neuron so
// op tracking names the operator the user called: TorchNeuron's
// get_executed_ops() lists aten::ones, aten::clone, aten::new_empty, as they
// are kernels of its own there. Each kernel is the composite itself
// (at::native::X, what the CompositeExplicitAutograd entry would run) after one
// relaxed atomic add; the parts it calls are recorded as before.
// CompositeImplicit ops (linear, pad, cross_entropy_loss, ...) decompose at
// the autograd key, above the backend: the same composite is registered there
// (AutogradPrivateUse1, and PrivateUse1 for inference mode, which skips the
// autograd keys), so autograd still records the ops it decomposes into.
#include <ATen/ATen.h>
#include <ATen/ops/_to_copy_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/cross_entropy_loss_native.h>
#include <ATen/ops/isfinite_native.h>
#include <ATen/ops/linear_native.h>
#include <ATen/ops/one_hot_native.h>
#include <ATen/ops/pad_native.h>
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
#include <ATen/ops/tril_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/triu_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/zeros_like_native.h>
#include <ATen/ops/zeros_native.h>
#include <torch/library.h>

#include "../instrumentation/op_tracking.h"

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

// Tensor.to / .cpu() / .neuron() (BackendSelect sends a copy to the device here too, as it
// dispatches on the device asked for): TorchNeuron's kernel for it is recorded, for a result on
// neuron (CPU -> neuron, neuron -> neuron); the copy off the device is its copy_ / _copy_from.
at::Tensor to_copy(const at::Tensor& self, OptDtype dtype, OptLayout layout, OptDevice device, OptBool pin_memory,
                   bool non_blocking, OptFormat memory_format) {
  NEURON_COUNTER("aten::_to_copy");
  return recorded(counter,
                  at::native::_to_copy(self, dtype, layout, device, pin_memory, non_blocking, memory_format));
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

// The out= factories (torch.zeros(size, out=t), ...): TorchNeuron's kernels for zeros / ones / full take the
// out= form too, so its op tracking names them; here PyTorch's composite (resize, then zero_ / fill_).
at::Tensor& zeros_out(at::IntArrayRef size, at::Tensor& out) {
  NEURON_COUNTER("aten::zeros.out");
  counter->increment();
  return at::native::zeros_out(size, out);
}

at::Tensor& ones_out(at::IntArrayRef size, at::Tensor& out) {
  NEURON_COUNTER("aten::ones.out");
  counter->increment();
  return at::native::ones_out(size, out);
}

at::Tensor& full_out(at::IntArrayRef size, const at::Scalar& fill_value, at::Tensor& out) {
  NEURON_COUNTER("aten::full.out");
  counter->increment();
  return at::native::full_out(size, fill_value, out);
}

// tril_ / triu_: PyTorch's kernel for a backend without its own (what TorchNeuron, which registers
// tril / tril.out, runs): the structured op's shape check, then tril.out with self as out, the device
// kernel, which op tracking names. The CPU's in-place kernel is the same computation (out is self).
at::Tensor& tril_(at::Tensor& self, c10::SymInt diagonal) {
  return at::compositeexplicitautogradnonfunctional::tril__symint(self, std::move(diagonal));
}

at::Tensor& triu_(at::Tensor& self, c10::SymInt diagonal) {
  return at::compositeexplicitautogradnonfunctional::triu__symint(self, std::move(diagonal));
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

// Tracing (FakeTensor, functionalization) runs the composite on stand-ins
// of neuron tensors: nothing runs on the device then.
void record_implicit(OpCounter* counter, const at::Tensor& t) {
  constexpr auto traced = c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::Functionalize});
  if (!t.key_set().has_any(traced)) counter->increment();
}

at::Tensor linear(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
  NEURON_COUNTER("aten::linear");
  record_implicit(counter, input);
  return at::native::linear(input, weight, bias);
}

at::Tensor isfinite(const at::Tensor& self) {
  NEURON_COUNTER("aten::isfinite");
  record_implicit(counter, self);
  return at::native::isfinite(self);
}

at::Tensor cross_entropy_loss(const at::Tensor& self, const at::Tensor& target, const std::optional<at::Tensor>& weight,
                              int64_t reduction, c10::SymInt ignore_index, double label_smoothing) {
  NEURON_COUNTER("aten::cross_entropy_loss");
  record_implicit(counter, self);
  return at::native::cross_entropy_loss_symint(self, target, weight, reduction, std::move(ignore_index),
                                               label_smoothing);
}

at::Tensor pad(const at::Tensor& self, c10::SymIntArrayRef pad, c10::string_view mode, std::optional<double> value) {
  NEURON_COUNTER("aten::pad");
  record_implicit(counter, self);
  return at::native::pad_symint(self, pad, mode, value);
}

at::Tensor one_hot(const at::Tensor& self, int64_t num_classes) {
  NEURON_COUNTER("aten::one_hot");
  record_implicit(counter, self);
  return at::native::one_hot(self, num_classes);
}

}  // namespace
}  // namespace torchneuron

#define NEURON_IMPLICIT(m)                                                \
  m.impl("linear", TORCH_FN(torchneuron::linear));                        \
  m.impl("isfinite", TORCH_FN(torchneuron::isfinite));                    \
  m.impl("cross_entropy_loss", TORCH_FN(torchneuron::cross_entropy_loss)); \
  m.impl("pad", TORCH_FN(torchneuron::pad));                              \
  m.impl("one_hot", TORCH_FN(torchneuron::one_hot))

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) { NEURON_IMPLICIT(m); }

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  NEURON_IMPLICIT(m);
  m.impl("clone", TORCH_FN(torchneuron::clone));
  m.impl("copy_", TORCH_FN(torchneuron::copy_));
  m.impl("ones", TORCH_FN(torchneuron::ones));
  m.impl("zeros", TORCH_FN(torchneuron::zeros));
  m.impl("full", TORCH_FN(torchneuron::full));
  m.impl("_to_copy", TORCH_FN(torchneuron::to_copy));
  m.impl("zeros.out", TORCH_FN(torchneuron::zeros_out));
  m.impl("ones.out", TORCH_FN(torchneuron::ones_out));
  m.impl("full.out", TORCH_FN(torchneuron::full_out));
  m.impl("tril_", TORCH_FN(torchneuron::tril_));
  m.impl("triu_", TORCH_FN(torchneuron::triu_));
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
