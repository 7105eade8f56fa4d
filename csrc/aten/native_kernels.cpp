// The native tier: unboxed kernels for the hot operators, each the host's
// CPU kernel run through the kernel wrapper (kernel_wrapper.h). Registering
// an operator here takes it off the boxed generic path.
#include <ATen/Operators.h>
#include <torch/library.h>

#include "kernel_wrapper.h"

namespace {
template <class Op>
std::string op_name() {
  std::string n(Op::name);
  if (Op::overload_name[0] != '\0') n = n + "." + Op::overload_name;
  return n;
}
}  // namespace

#define NEURON_NATIVE(m, op) \
  m.impl(op_name<at::_ops::op>().c_str(), TORCH_FN(::torchneuron::NativeKernel<at::_ops::op>::call))
// For kernels that draw random numbers without a generator argument.
#define NEURON_NATIVE_RNG(m, op) \
  m.impl(op_name<at::_ops::op>().c_str(), TORCH_FN((::torchneuron::NativeKernel<at::_ops::op, true>::call)))

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  NEURON_NATIVE(m, add_Tensor);
  NEURON_NATIVE(m, add__Tensor);
  NEURON_NATIVE(m, add_out);
  NEURON_NATIVE(m, mul_Tensor);
  NEURON_NATIVE(m, mul__Tensor);
  NEURON_NATIVE(m, mm);
  NEURON_NATIVE(m, sum);
  NEURON_NATIVE(m, relu);
  NEURON_NATIVE_RNG(m, native_dropout);
  NEURON_NATIVE(m, cat);
  NEURON_NATIVE(m, max_dim);
}
