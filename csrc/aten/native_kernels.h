// Registration helpers for the native tier (see tools/gen_native_kernels.py).
#pragma once

#include <ATen/Operators.h>
#include <torch/library.h>

#include <string>

#include "kernel_wrapper.h"

namespace torchneuron {
template <class Op>
std::string op_name() {
  std::string n(Op::name);
  if (Op::overload_name[0] != '\0') n = n + "." + Op::overload_name;
  return n;
}
}  // namespace torchneuron

#define NEURON_NATIVE(m, op) \
  m.impl(::torchneuron::op_name<at::_ops::op>().c_str(), TORCH_FN(::torchneuron::NativeKernel<at::_ops::op>::call))
