// Operators TorchNeuron runs as one device operation (one NEFF) where
// PyTorch's kernel for a backend other than CUDA is a decomposition into
// several ATen ops: here each is one device kernel too, so op tracking and the
// profiler count what TorchNeuron counts.
#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <ATen/Operators.h>
#include <ATen/native/layer_norm.h>
#include <ATen/ops/index_select_backward_native.h>
#include <ATen/ops/value_selecting_reduction_backward_native.h>
#include <ATen/record_function.h>
#include <torch/library.h>

#include "host_compute.h"

namespace torchneuron {
namespace {

// torch.rms_norm: TorchNeuron runs it as one registered operator,
// _fused_rms_norm (one NEFF), with its own backward _fused_rms_norm_backward.
// PyTorch gives _fused_rms_norm only a CompositeImplicitAutograd kernel (six
// ATen ops, differentiated through) and _fused_rms_norm_backward only CUDA's.
// A PrivateUse1 kernel for the forward makes AutogradPrivateUse1 use the
// operator's derivative formula (derivatives.yaml), so each direction is one
// device kernel. The forward is the CPU's own composite on host views (the
// CPU's numbers); the backward is torch._decomp's formula, which is also the
// operator's Meta kernel, so eager and compiled graphs agree on dtypes.
// The host ops inside are the kernel's internals, not operators the program
// dispatched: hidden from the profiler as a NEFF's instructions are.
at::ScalarType rms_norm_computation_type(at::ScalarType t) {
  return (t == at::kHalf || t == at::kBFloat16) ? at::kFloat : t;
}

std::tuple<at::Tensor, at::Tensor> rms_norm_backward_on_host(const at::Tensor& grad_out, const at::Tensor& input,
                                                             c10::IntArrayRef normalized_shape, const at::Tensor& rstd,
                                                             const std::optional<at::Tensor>& weight,
                                                             std::array<bool, 2> output_mask) {
  const int64_t axis = input.dim() - static_cast<int64_t>(normalized_shape.size());
  TORCH_CHECK(axis >= 0 && input.sizes().slice(axis).equals(normalized_shape),
              "_fused_rms_norm_backward: normalized_shape ", normalized_shape, " does not end the input's shape ",
              input.sizes());
  const bool has_weight = weight.has_value() && weight->defined();
  int64_t n = 1, m = 1;
  for (int64_t i = 0; i < input.dim(); ++i) (i >= axis ? n : m) *= input.size(i);
  if (m == 0 || n == 0) {
    return {output_mask[0] ? at::zeros_like(input) : at::Tensor(),
            output_mask[1] && has_weight ? input.new_zeros(normalized_shape) : at::Tensor()};
  }
  // The forward's arithmetic type: the input's computation type, promoted with the weight's
  // (a bfloat16 input with a float32 weight is computed in float32, as the CPU's composite does).
  at::ScalarType ct = rms_norm_computation_type(input.scalar_type());
  if (has_weight) ct = c10::promoteTypes(ct, rms_norm_computation_type(weight->scalar_type()));
  const at::Tensor g = grad_out.to(ct).contiguous();
  const at::Tensor x = input.to(ct).contiguous();
  at::Tensor r = rstd;
  while (r.dim() < x.dim()) r = r.unsqueeze(-1);
  const at::Tensor grad_x_hat = has_weight ? g * weight->to(ct) : g;
  const at::Tensor x_hat = x * r;
  std::vector<int64_t> inner, outer;
  for (int64_t i = 0; i < x.dim(); ++i) (i >= axis ? inner : outer).push_back(i);
  at::Tensor d_input, d_weight;
  if (output_mask[0]) {
    const at::Tensor sum = (x_hat * grad_x_hat).sum(inner, /*keepdim=*/true);
    d_input = ((grad_x_hat - (x_hat / static_cast<double>(n)) * sum) * r).to(input.scalar_type());
  }
  if (output_mask[1] && has_weight) {
    at::Tensor full = g * x_hat;
    // In the weight's dtype: with mixed dtypes (autocast's bfloat16 activations, float32 weights) the
    // float32 gradient is not rounded through bfloat16, so it equals the CPU's (whose composite
    // differentiates a float32 multiply by the weight). torch._decomp's formula, the operator's Meta
    // kernel, casts to the input's dtype instead; autograd casts a gradient to the weight's dtype
    // either way, so only the rounding differs.
    d_weight = (outer.empty() ? full : full.sum(outer, /*keepdim=*/false)).to(weight->scalar_type());
  }
  return {d_input, d_weight};
}

std::tuple<at::Tensor, at::Tensor> fused_rms_norm(const at::Tensor& input, c10::IntArrayRef normalized_shape,
                                                  const std::optional<at::Tensor>& weight, std::optional<double> eps) {
  static OpCounter* counter = op_counter("aten::_fused_rms_norm", "", ExecutionTier::kNative);
  auto fn = [&](const at::Tensor& x, const std::optional<at::Tensor>& w) {
    HiddenInternals internals;
    // The CPU's entry for this operator is its composite (libtorch does not export it by name).
    return at::_ops::_fused_rms_norm::redispatch(c10::DispatchKeySet(c10::DispatchKey::CPU), x, normalized_shape, w,
                                                 eps);
  };
  return run_on_host<std::tuple<at::Tensor, at::Tensor>>("aten::_fused_rms_norm", counter, fn, input, weight);
}

std::tuple<at::Tensor, at::Tensor> fused_rms_norm_backward(const at::Tensor& grad_out, const at::Tensor& input,
                                                           c10::IntArrayRef normalized_shape, const at::Tensor& rstd,
                                                           const std::optional<at::Tensor>& weight,
                                                           std::array<bool, 2> output_mask) {
  static OpCounter* counter = op_counter("aten::_fused_rms_norm_backward", "", ExecutionTier::kNative);
  auto fn = [&](const at::Tensor& g, const at::Tensor& x, const at::Tensor& r, const std::optional<at::Tensor>& w) {
    HiddenInternals internals;
    return rms_norm_backward_on_host(g, x, normalized_shape, r, w, output_mask);
  };
  return run_on_host<std::tuple<at::Tensor, at::Tensor>>("aten::_fused_rms_norm_backward", counter, fn, grad_out,
                                                         input, rstd, weight);
}

// aten::linear_backward: PyTorch has kernels for it only with oneDNN tensors (MkldnnCPU), so the generic
// path, which runs the CPU's kernel, cannot run it; TorchNeuron runs it on the device (its own suite calls
// it directly). Here it is the CPU's linear gradient: grad_input = grad_output @ weight, grad_weight =
// grad_output^T @ input and grad_bias = grad_output summed over the leading dimensions flattened, each
// only when output_mask asks for it (undefined otherwise, as an autograd formula returns them).
std::tuple<at::Tensor, at::Tensor, at::Tensor> linear_backward(const at::Tensor& self, const at::Tensor& grad_output,
                                                               const at::Tensor& weight,
                                                               std::array<bool, 3> output_mask) {
  static OpCounter* counter = op_counter("aten::linear_backward", "", ExecutionTier::kNative);
  TORCH_CHECK(weight.dim() == 2, "linear_backward: expected weight of shape (out_features, in_features), got ",
              weight.sizes());
  TORCH_CHECK(self.dim() >= 1 && self.size(-1) == weight.size(1), "linear_backward: input of shape ", self.sizes(),
              " does not match weight of shape ", weight.sizes(), " (its last dimension must be in_features)");
  TORCH_CHECK(grad_output.dim() == self.dim() && grad_output.size(-1) == weight.size(0) &&
                  grad_output.sizes().slice(0, self.dim() - 1) == self.sizes().slice(0, self.dim() - 1),
              "linear_backward: grad_output of shape ", grad_output.sizes(), " is not the shape of the output of input ",
              self.sizes(), " and weight ", weight.sizes());
  auto fn = [&](const at::Tensor& x, const at::Tensor& g, const at::Tensor& w) {
    HiddenInternals internals;
    const at::Tensor g2 = g.reshape({-1, g.size(-1)});
    at::Tensor d_input, d_weight, d_bias;
    if (output_mask[0]) d_input = at::matmul(g, w);
    if (output_mask[1]) d_weight = g2.t().mm(x.reshape({-1, x.size(-1)}));
    if (output_mask[2]) d_bias = g2.sum(0);
    return std::tuple<at::Tensor, at::Tensor, at::Tensor>{d_input, d_weight, d_bias};
  };
  return run_on_host<std::tuple<at::Tensor, at::Tensor, at::Tensor>>("aten::linear_backward", counter, fn, self,
                                                                     grad_output, weight);
}

// The backward of index_select and of the value-selecting reductions (max/min/median/mode/kthvalue along a
// dim): TorchNeuron registers a kernel for each (its suite asserts they run on neuron), where PyTorch's only
// kernel is a CompositeImplicitAutograd decomposition (zeros, then index_add_ / scatter_). Here each is one
// device kernel, the CPU's composite on host views (the CPU's numbers).
at::Tensor index_select_backward(const at::Tensor& grad, c10::SymIntArrayRef self_sizes, int64_t dim,
                                 const at::Tensor& index) {
  static OpCounter* counter = op_counter("aten::index_select_backward", "", ExecutionTier::kNative);
  auto fn = [&](const at::Tensor& g, const at::Tensor& i) {
    HiddenInternals internals;
    return at::native::index_select_backward_symint(g, self_sizes, dim, i);
  };
  return run_on_host<at::Tensor>("aten::index_select_backward", counter, fn, grad, index);
}

// Neither has a derivative of its own (PyTorch differentiates the decomposition; the formula
// derivatives.yaml lists for value_selecting_reduction_backward raises "not implemented"), so with only a
// PrivateUse1 kernel double backward through index_select or max(dim) would fail or, through the autograd
// fallback, be silently zero. Their autograd kernels therefore run PyTorch's decomposition when the result
// must be differentiable (the incoming gradient requires grad under grad mode, or carries a forward-mode
// tangent), recorded op by op by autograd as on CPU, and the device kernel otherwise (a plain backward
// pass, whose gradients do not require grad). Tracing (FakeTensor, functionalization) gets the
// decomposition or its own handling either way.
bool needs_differentiable(const at::Tensor& grad) {
  return (at::GradMode::is_enabled() && grad.requires_grad()) || grad._fw_grad(/*level=*/0).defined();
}

void record_decomposed(OpCounter* counter, const at::Tensor& grad) {
  constexpr auto traced = c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::Functionalize});
  if (!grad.key_set().has_any(traced)) counter->increment();
}

at::Tensor index_select_backward_autograd(c10::DispatchKeySet ks, const at::Tensor& grad,
                                          c10::SymIntArrayRef self_sizes, int64_t dim, const at::Tensor& index) {
  if (needs_differentiable(grad)) {
    static OpCounter* counter = op_counter("aten::index_select_backward", "", ExecutionTier::kNative);
    record_decomposed(counter, grad);
    return at::native::index_select_backward_symint(grad, self_sizes, dim, index);
  }
  return at::_ops::index_select_backward::redispatch(ks & c10::after_autograd_keyset, grad, self_sizes, dim, index);
}

at::Tensor value_selecting_reduction_backward(const at::Tensor& grad, int64_t dim, const at::Tensor& indices,
                                              c10::SymIntArrayRef sizes, bool keepdim) {
  static OpCounter* counter = op_counter("aten::value_selecting_reduction_backward", "", ExecutionTier::kNative);
  auto fn = [&](const at::Tensor& g, const at::Tensor& i) {
    HiddenInternals internals;
    return at::native::value_selecting_reduction_backward_symint(g, dim, i, sizes, keepdim);
  };
  return run_on_host<at::Tensor>("aten::value_selecting_reduction_backward", counter, fn, grad, indices);
}

at::Tensor value_selecting_reduction_backward_autograd(c10::DispatchKeySet ks, const at::Tensor& grad, int64_t dim,
                                                       const at::Tensor& indices, c10::SymIntArrayRef sizes,
                                                       bool keepdim) {
  if (needs_differentiable(grad)) {
    static OpCounter* counter = op_counter("aten::value_selecting_reduction_backward", "", ExecutionTier::kNative);
    record_decomposed(counter, grad);
    return at::native::value_selecting_reduction_backward_symint(grad, dim, indices, sizes, keepdim);
  }
  return at::_ops::value_selecting_reduction_backward::redispatch(ks & c10::after_autograd_keyset, grad, dim, indices,
                                                                  sizes, keepdim);
}

// torch.rms_norm itself (CompositeImplicitAutograd): PyTorch's composite calls
// _fused_rms_norm only when input and weight have one dtype, and otherwise
// (a bfloat16 input with a float32 weight, as autocast and mixed-precision
// training produce) decomposes into six ops with a warning. TorchNeuron
// overrides rms_norm for PrivateUse1 and AutogradPrivateUse1 so both cases are
// _fused_rms_norm (it upcasts mixed inputs around the call); here the fused
// kernel takes mixed dtypes as they are (its host computation is the CPU's
// composite, which promotes them), so the mixed case is one kernel each way,
// with the CPU's numbers and dtypes. Registered at AutogradPrivateUse1 as a
// composite (no autograd of its own: _fused_rms_norm's derivative formula
// records the backward) and at PrivateUse1 for inference mode; an NKI route
// (nki/aten_routing.py) for aten::rms_norm is installed above it at both keys
// and falls back to it.
at::Tensor rms_norm(const at::Tensor& input, c10::SymIntArrayRef normalized_shape,
                    const std::optional<at::Tensor>& weight, std::optional<double> eps) {
  c10::MaybeOwned<at::Tensor> w = at::borrow_from_optional_tensor(weight);
  at::native::_check_rms_norm_inputs_symint(input, normalized_shape, *w);
  std::vector<int64_t> shape;
  shape.reserve(normalized_shape.size());
  for (const c10::SymInt& s : normalized_shape) shape.push_back(s.guard_int(__FILE__, __LINE__));
  return std::get<0>(at::_fused_rms_norm(input, shape, weight, eps));
}

}  // namespace
}  // namespace torchneuron

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_rms_norm", TORCH_FN(torchneuron::fused_rms_norm));
  m.impl("_fused_rms_norm_backward", TORCH_FN(torchneuron::fused_rms_norm_backward));
  m.impl("rms_norm", TORCH_FN(torchneuron::rms_norm));
  m.impl("linear_backward", TORCH_FN(torchneuron::linear_backward));
  m.impl("index_select_backward", TORCH_FN(torchneuron::index_select_backward));
  m.impl("value_selecting_reduction_backward", TORCH_FN(torchneuron::value_selecting_reduction_backward));
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("rms_norm", TORCH_FN(torchneuron::rms_norm));
  m.impl("index_select_backward", TORCH_FN(torchneuron::index_select_backward_autograd));
  m.impl("value_selecting_reduction_backward", TORCH_FN(torchneuron::value_selecting_reduction_backward_autograd));
}
