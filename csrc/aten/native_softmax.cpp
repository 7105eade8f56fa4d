// _softmax / _log_softmax with half_to_float, and their backwards, as CUDA
// computes them: a float32 result from a float16 input (the form autocast and
// fused attention code ask for), the gradient back in float16. The CPU kernel
// refuses half_to_float ("not supported on CPU"); neuron runs the float32
// kernel on the host and rounds the gradient once. Every other call is the
// native tier's kernel, unchanged.
#include <ATen/Functions.h>
#include <torch/library.h>

#include "host_compute.h"
#include "native_kernels.h"

namespace torchneuron {
namespace {

void check_half_to_float(const at::Tensor& self) {
  TORCH_CHECK(self.scalar_type() == at::kHalf, "conversion is supported for Half type only (half_to_float=True needs a ",
              "float16 input, got ", self.scalar_type(), ")");
}

// The forward's input dtype and the gradient's, as CUDA accepts them.
bool half_to_float_backward(const at::Tensor& grad_output, at::ScalarType input_dtype) {
  if (grad_output.scalar_type() == input_dtype) return false;
  TORCH_CHECK(grad_output.scalar_type() == at::kFloat && input_dtype == at::kHalf,
              "expected input and grad types to match, or input to be at::Half and grad to be at::Float (got grad ",
              grad_output.scalar_type(), ", input ", input_dtype, ")");
  return true;
}

template <bool Log>
at::Tensor softmax(const at::Tensor& self, int64_t dim, bool half_to_float) {
  using Op = std::conditional_t<Log, at::_ops::_log_softmax, at::_ops::_softmax>;
  if (C10_LIKELY(!half_to_float)) return NativeKernel<Op>::call(self, dim, false);
  static OpCounter* counter = op_counter(Op::name, "", ExecutionTier::kNative);
  check_half_to_float(self);
  auto fn = [dim](const at::Tensor& x) {
    return Log ? at::_log_softmax(x.to(at::kFloat), dim, false) : at::_softmax(x.to(at::kFloat), dim, false);
  };
  return run_on_host<at::Tensor>(Op::name, counter, fn, self);
}

template <bool Log>
at::Tensor softmax_backward(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                            at::ScalarType input_dtype) {
  using Op = std::conditional_t<Log, at::_ops::_log_softmax_backward_data, at::_ops::_softmax_backward_data>;
  if (C10_LIKELY(!half_to_float_backward(grad_output, input_dtype)))
    return NativeKernel<Op>::call(grad_output, output, dim, input_dtype);
  static OpCounter* counter = op_counter(Op::name, "", ExecutionTier::kNative);
  auto fn = [dim](const at::Tensor& g, const at::Tensor& out) {
    const at::Tensor grad = Log ? at::_log_softmax_backward_data(g, out.to(at::kFloat), dim, at::kFloat)
                                : at::_softmax_backward_data(g, out.to(at::kFloat), dim, at::kFloat);
    return grad.to(at::kHalf);
  };
  return run_on_host<at::Tensor>(Op::name, counter, fn, grad_output, output);
}

}  // namespace
}  // namespace torchneuron

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_softmax", TORCH_FN(torchneuron::softmax<false>));
  m.impl("_log_softmax", TORCH_FN(torchneuron::softmax<true>));
  m.impl("_softmax_backward_data", TORCH_FN(torchneuron::softmax_backward<false>));
  m.impl("_log_softmax_backward_data", TORCH_FN(torchneuron::softmax_backward<true>));
}
