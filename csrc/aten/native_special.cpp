// Native kernels that are not a plain redispatch to the CPU kernel of the
// same operator: PyTorch routes these through "overrideable" entry points or
// per-device stubs for backends other than CPU and CUDA, or CUDA accepts
// inputs the CPU kernel refuses.
#include <ATen/Dispatch.h>
#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <ATen/native/Resize.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_fused_sdp_choice_native.h>
#include <torch/library.h>

#include <vector>

#include "host_compute.h"
#include "../instrumentation/flops.h"

namespace torchneuron {
namespace {

// Convolutions on backends other than CPU/CUDA reach convolution_overrideable;
// here it runs the CPU's convolution (oneDNN and all) on zero-copy views.
at::Tensor convolution_overrideable(const at::Tensor& input, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias, c10::IntArrayRef stride,
                                    c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
                                    c10::IntArrayRef output_padding, int64_t groups) {
  static OpCounter* counter = op_counter("aten::convolution_overrideable", "", ExecutionTier::kNative);
  auto fn = [&](KernelCall& c, const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& b) {
    at::Tensor out = at::convolution(x, w, b, stride, padding, dilation, transposed, output_padding, groups);
    c.set_flops(convolution_flops(transposed ? x : out, w));
    return out;
  };
  return run_call_on_host<at::Tensor>("aten::convolution_overrideable", counter, fn, input, weight, bias);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_overrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
    c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed, c10::IntArrayRef output_padding,
    int64_t groups, std::array<bool, 3> output_mask) {
  static OpCounter* counter = op_counter("aten::convolution_backward_overrideable", "", ExecutionTier::kNative);
  auto fn = [&](KernelCall& c, const at::Tensor& g, const at::Tensor& x, const at::Tensor& w) {
    // The input's and the weight's gradients are each as many multiply-adds as the forward.
    c.set_flops(convolution_flops(transposed ? x : g, w) * (int64_t{output_mask[0]} + int64_t{output_mask[1]}));
    std::vector<int64_t> bias_sizes{g.size(1)};
    return at::convolution_backward(g, x, w, output_mask[2] ? c10::OptionalIntArrayRef(bias_sizes) : std::nullopt,
                                    stride, padding, dilation, transposed, output_padding, groups, output_mask);
  };
  return run_call_on_host<std::tuple<at::Tensor, at::Tensor, at::Tensor>>(
      "aten::convolution_backward_overrideable", counter, fn, grad_output, input, weight);
}

// CUDA's histc takes integer tensors (counts come back in the input's dtype) and
// the CPU kernel does not; libraries that treat neuron like CUDA rely on it
// (Hugging Face's mixture-of-experts routing counts expert ids with it). The
// integer path follows CUDA's kernel: bounds are cast to the input's type, an
// empty range is taken from the data, then widened by one on each side, and
// bin = (x - min) * bins / (max - min) in 64-bit integer arithmetic, the top
// edge falling into the last bin. One pass over the values: written as ATen ops
// (filter, arithmetic, bincount) it was ten kernels and a masked_select, 2.7x
// the CPU's float histc at MoE routing sizes.
template <class T>
void count_integer_bins(const at::Tensor& x, int64_t lo, int64_t hi, int64_t bins, int64_t* counts) {
  const at::Tensor values = x.contiguous();
  const T* v = values.const_data_ptr<T>();
  const int64_t n = values.numel();
  const int64_t range = hi - lo;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t e = static_cast<int64_t>(v[i]);
    if (e < lo || e > hi) continue;
    const int64_t bin = (e - lo) * bins / range;
    ++counts[bin == bins ? bins - 1 : bin];
  }
}

at::Tensor histc_on_host(const at::Tensor& x, int64_t bins, const at::Scalar& min, const at::Scalar& max) {
  if (!c10::isIntegralType(x.scalar_type(), /*includeBool=*/false)) return at::histc(x, bins, min, max);
  TORCH_CHECK(bins > 0, "torch.histc: bins must be > 0, but got ", bins, " for bins");
  int64_t lo = 0, hi = 0;
  AT_DISPATCH_INTEGRAL_TYPES(x.scalar_type(), "histc", [&] {
    lo = static_cast<int64_t>(min.to<scalar_t>());
    hi = static_cast<int64_t>(max.to<scalar_t>());
  });
  if (lo == hi && x.numel() > 0) {
    lo = x.min().item<int64_t>();
    hi = x.max().item<int64_t>();
  }
  if (lo == hi) {
    lo -= 1;
    hi += 1;
  }
  TORCH_CHECK(lo < hi, "torch.histc: max must be larger than min");
  std::vector<int64_t> counts(static_cast<size_t>(bins), 0);
  AT_DISPATCH_INTEGRAL_TYPES(x.scalar_type(), "histc", [&] { count_integer_bins<scalar_t>(x, lo, hi, bins, counts.data()); });
  at::Tensor out = at::empty({bins}, x.options());
  AT_DISPATCH_INTEGRAL_TYPES(x.scalar_type(), "histc", [&] {
    scalar_t* o = out.mutable_data_ptr<scalar_t>();
    for (int64_t b = 0; b < bins; ++b) o[b] = static_cast<scalar_t>(counts[b]);
  });
  return out;
}

at::Tensor histc(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max) {
  static OpCounter* counter = op_counter("aten::histc", "", ExecutionTier::kNative);
  auto fn = [&](const at::Tensor& x) { return histc_on_host(x, bins, min, max); };
  return run_on_host<at::Tensor>("aten::histc", counter, fn, self);
}

at::Tensor& histc_out(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max,
                      at::Tensor& out) {
  static OpCounter* counter = op_counter("aten::histc", "out", ExecutionTier::kNative);
  counter->increment();
  KernelCall c("aten::histc", "out");
  c.note(self);
  c.note(out);
  c.resolve();
  // A CPU `out` was refused by resolve(): written arguments must be on the device.
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "torch.histc: input tensor and output tensor should have ",
              "the same dtype, but got input ", self.scalar_type(), " and output ", out.scalar_type());
  at::Tensor& host_out = c.host(out);
  return c.run(counter, /*device_rng=*/false, [&]() -> at::Tensor& {
    at::Tensor r = histc_on_host(c.host(self), bins, min, max);
    at::native::resize_output(host_out, r.sizes());
    host_out.copy_(r);
    return host_out;
  });
}

// The fused RNN cells. ATen's LSTM/GRU cells (RNN.cpp) send CUDA, XPU and
// PrivateUse1 inputs to _thnn_fused_lstm_cell / _thnn_fused_gru_cell, which
// only CUDA implements; these are CUDA's kernels (aten/src/ATen/native/cuda/
// RNN.cu) written with ATen ops over host views, with CUDA's workspace layout
// (the backward formulas read it): LSTM [i, f, g, o] activated gates; GRU
// [r, z, n, hx, hn + b_hn].
std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm_cell_on_host(const at::Tensor& input_gates,
                                                               const at::Tensor& hidden_gates, const at::Tensor& cx,
                                                               const std::optional<at::Tensor>& input_bias,
                                                               const std::optional<at::Tensor>& hidden_bias) {
  TORCH_CHECK(input_gates.sizes() == hidden_gates.sizes() && input_gates.dim() == 2 &&
                  input_gates.size(1) == 4 * cx.size(-1),
              "_thnn_fused_lstm_cell: gates of shape [batch, 4 * hidden] expected, got ", input_gates.sizes(), " and ",
              hidden_gates.sizes(), " for cx ", cx.sizes());
  at::Tensor gates = input_gates + hidden_gates;
  if (input_bias.has_value() && input_bias->defined()) gates.add_(*input_bias);
  if (hidden_bias.has_value() && hidden_bias->defined()) gates.add_(*hidden_bias);
  auto g = gates.unsafe_chunk(4, 1);
  at::Tensor i = g[0].sigmoid_(), f = g[1].sigmoid_(), c = g[2].tanh_(), o = g[3].sigmoid_();
  at::Tensor cy = (f * cx).add_(i * c);
  at::Tensor hy = o * cy.tanh();
  return {hy, cy, gates};  // gates now holds the activated gates: the workspace
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm_cell_backward_on_host(const std::optional<at::Tensor>& grad_hy,
                                                                        const std::optional<at::Tensor>& grad_cy,
                                                                        const at::Tensor& cx, const at::Tensor& cy,
                                                                        const at::Tensor& workspace, bool has_bias) {
  const bool ghy = grad_hy.has_value() && grad_hy->defined(), gcy = grad_cy.has_value() && grad_cy->defined();
  if (!ghy && !gcy) return {};
  auto w = workspace.unsafe_chunk(4, 1);
  const at::Tensor &i = w[0], &f = w[1], &c = w[2], &o = w[3];
  const at::Tensor tcy = cy.tanh();
  const at::Tensor go = ghy ? *grad_hy : at::zeros_like(cx);
  at::Tensor gc = go * o * (1 - tcy * tcy);
  if (gcy) gc.add_(*grad_cy);
  at::Tensor grad_gates = at::cat({gc * c * (1 - i) * i, gc * cx * (1 - f) * f, gc * i * (1 - c * c),
                                   go * tcy * (1 - o) * o},
                                  1);
  at::Tensor grad_cx = gc * f;
  at::Tensor grad_bias = has_bias ? grad_gates.sum(0) : at::Tensor();
  return {grad_gates, grad_cx, grad_bias};
}

std::tuple<at::Tensor, at::Tensor> gru_cell_on_host(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                                                    const at::Tensor& hx, const std::optional<at::Tensor>& input_bias,
                                                    const std::optional<at::Tensor>& hidden_bias) {
  TORCH_CHECK(input_gates.sizes() == hidden_gates.sizes() && input_gates.dim() == 2 &&
                  input_gates.size(1) == 3 * hx.size(-1),
              "_thnn_fused_gru_cell: gates of shape [batch, 3 * hidden] expected, got ", input_gates.sizes(), " and ",
              hidden_gates.sizes(), " for hx ", hx.sizes());
  at::Tensor ig = input_gates, hg = hidden_gates;
  if (input_bias.has_value() && input_bias->defined()) ig = ig + *input_bias;
  if (hidden_bias.has_value() && hidden_bias->defined()) hg = hg + *hidden_bias;
  auto ic = ig.unsafe_chunk(3, 1), hc = hg.unsafe_chunk(3, 1);
  at::Tensor r = (ic[0] + hc[0]).sigmoid_(), z = (ic[1] + hc[1]).sigmoid_();
  at::Tensor n = (ic[2] + r * hc[2]).tanh_();
  at::Tensor hy = n + z * (hx - n);
  return {hy, at::cat({r, z, n, hx, hc[2]}, 1)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> gru_cell_backward_on_host(
    const at::Tensor& grad_hy, const at::Tensor& workspace, bool has_bias) {
  auto w = workspace.unsafe_chunk(5, 1);
  const at::Tensor &r = w[0], &z = w[1], &n = w[2], &hx = w[3], &hn = w[4];
  const at::Tensor& go = grad_hy;
  at::Tensor gz = go * (hx - n) * (1 - z) * z;
  at::Tensor gn = go * (1 - z) * (1 - n * n);
  at::Tensor gr = gn * hn * (1 - r) * r;
  at::Tensor grad_input_gates = at::cat({gr, gz, gn}, 1);
  at::Tensor grad_hidden_gates = at::cat({gr, gz, gn * r}, 1);
  at::Tensor grad_hx = go * z;
  if (!has_bias) return {grad_input_gates, grad_hidden_gates, grad_hx, at::Tensor(), at::Tensor()};
  return {grad_input_gates, grad_hidden_gates, grad_hx, grad_input_gates.sum(0), grad_hidden_gates.sum(0)};
}

using Tensor3 = std::tuple<at::Tensor, at::Tensor, at::Tensor>;
using Tensor5 = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

Tensor3 fused_lstm_cell(const at::Tensor& input_gates, const at::Tensor& hidden_gates, const at::Tensor& cx,
                        const std::optional<at::Tensor>& input_bias, const std::optional<at::Tensor>& hidden_bias) {
  static OpCounter* counter = op_counter("aten::_thnn_fused_lstm_cell", "", ExecutionTier::kNative);
  return run_on_host<Tensor3>("aten::_thnn_fused_lstm_cell", counter, &lstm_cell_on_host, input_gates, hidden_gates,
                              cx, input_bias, hidden_bias);
}

Tensor3 fused_lstm_cell_backward(const std::optional<at::Tensor>& grad_hy, const std::optional<at::Tensor>& grad_cy,
                                 const at::Tensor& cx, const at::Tensor& cy, const at::Tensor& workspace,
                                 bool has_bias) {
  static OpCounter* counter = op_counter("aten::_thnn_fused_lstm_cell_backward_impl", "", ExecutionTier::kNative);
  auto fn = [has_bias](const std::optional<at::Tensor>& ghy, const std::optional<at::Tensor>& gcy,
                       const at::Tensor& cx_, const at::Tensor& cy_, const at::Tensor& ws) {
    return lstm_cell_backward_on_host(ghy, gcy, cx_, cy_, ws, has_bias);
  };
  return run_on_host<Tensor3>("aten::_thnn_fused_lstm_cell_backward_impl", counter, fn, grad_hy, grad_cy, cx, cy,
                              workspace);
}

std::tuple<at::Tensor, at::Tensor> fused_gru_cell(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                                                  const at::Tensor& hx, const std::optional<at::Tensor>& input_bias,
                                                  const std::optional<at::Tensor>& hidden_bias) {
  static OpCounter* counter = op_counter("aten::_thnn_fused_gru_cell", "", ExecutionTier::kNative);
  return run_on_host<std::tuple<at::Tensor, at::Tensor>>("aten::_thnn_fused_gru_cell", counter, &gru_cell_on_host,
                                                         input_gates, hidden_gates, hx, input_bias, hidden_bias);
}

Tensor5 fused_gru_cell_backward(const at::Tensor& grad_hy, const at::Tensor& workspace, bool has_bias) {
  static OpCounter* counter = op_counter("aten::_thnn_fused_gru_cell_backward", "", ExecutionTier::kNative);
  auto fn = [has_bias](const at::Tensor& g, const at::Tensor& ws) { return gru_cell_backward_on_host(g, ws, has_bias); };
  return run_on_host<Tensor5>("aten::_thnn_fused_gru_cell_backward", counter, fn, grad_hy, workspace);
}

// Half / BFloat16 where CUDA has a kernel and the CPU does not (OpInfo's
// dtypesIfCUDA minus dtypes): libraries that give neuron CUDA's code path
// reach them, e.g. a model cast to bfloat16. CUDA computes these in float
// (its accumulate type) and rounds once on store; so does this: float32 on
// the host, the result rounded to the input's dtype.
bool reduced(const at::Tensor& t) {
  return t.defined() && (t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16);
}
at::Tensor up(const at::Tensor& t) { return reduced(t) ? t.to(at::kFloat) : t; }
std::optional<at::Tensor> up(const std::optional<at::Tensor>& t) {
  if (!t.has_value()) return t;
  return up(*t);
}

at::Tensor avg_pool3d(const at::Tensor& self, c10::IntArrayRef kernel_size, c10::IntArrayRef stride,
                      c10::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                      std::optional<int64_t> divisor_override) {
  static OpCounter* counter = op_counter("aten::avg_pool3d", "", ExecutionTier::kNative);
  auto fn = [&](const at::Tensor& x) {
    return at::avg_pool3d(up(x), kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
        .to(x.scalar_type());
  };
  return run_on_host<at::Tensor>("aten::avg_pool3d", counter, fn, self);
}

at::Tensor avg_pool3d_backward(const at::Tensor& grad_output, const at::Tensor& self, c10::IntArrayRef kernel_size,
                               c10::IntArrayRef stride, c10::IntArrayRef padding, bool ceil_mode,
                               bool count_include_pad, std::optional<int64_t> divisor_override) {
  static OpCounter* counter = op_counter("aten::avg_pool3d_backward", "", ExecutionTier::kNative);
  auto fn = [&](const at::Tensor& g, const at::Tensor& x) {
    return at::avg_pool3d_backward(up(g), up(x), kernel_size, stride, padding, ceil_mode, count_include_pad,
                                   divisor_override)
        .to(x.scalar_type());
  };
  return run_on_host<at::Tensor>("aten::avg_pool3d_backward", counter, fn, grad_output, self);
}

at::Tensor upsample_bilinear2d_aa(const at::Tensor& input, c10::SymIntArrayRef output_size, bool align_corners,
                                  std::optional<double> scales_h, std::optional<double> scales_w) {
  static OpCounter* counter = op_counter("aten::_upsample_bilinear2d_aa", "", ExecutionTier::kNative);
  auto fn = [&](const at::Tensor& x) {
    return at::_upsample_bilinear2d_aa_symint(up(x), output_size, align_corners, scales_h, scales_w)
        .to(x.scalar_type());
  };
  return run_on_host<at::Tensor>("aten::_upsample_bilinear2d_aa", counter, fn, input);
}

at::Tensor upsample_bilinear2d_aa_backward(const at::Tensor& grad_output, c10::SymIntArrayRef output_size,
                                           c10::SymIntArrayRef input_size, bool align_corners,
                                           std::optional<double> scales_h, std::optional<double> scales_w) {
  static OpCounter* counter = op_counter("aten::_upsample_bilinear2d_aa_backward", "", ExecutionTier::kNative);
  auto fn = [&](const at::Tensor& g) {
    return at::_upsample_bilinear2d_aa_backward_symint(up(g), output_size, input_size, align_corners, scales_h,
                                                       scales_w)
        .to(g.scalar_type());
  };
  return run_on_host<at::Tensor>("aten::_upsample_bilinear2d_aa_backward", counter, fn, grad_output);
}

at::Tensor multi_margin_loss(const at::Tensor& self, const at::Tensor& target, const at::Scalar& p,
                             const at::Scalar& margin, const std::optional<at::Tensor>& weight, int64_t reduction) {
  static OpCounter* counter = op_counter("aten::multi_margin_loss", "", ExecutionTier::kNative);
  auto fn = [&](const at::Tensor& x, const at::Tensor& t, const std::optional<at::Tensor>& w) {
    return at::multi_margin_loss(up(x), t, p, margin, up(w), reduction).to(x.scalar_type());
  };
  return run_on_host<at::Tensor>("aten::multi_margin_loss", counter, fn, self, target, weight);
}

at::Tensor multi_margin_loss_backward(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                                      const at::Scalar& p, const at::Scalar& margin,
                                      const std::optional<at::Tensor>& weight, int64_t reduction) {
  static OpCounter* counter = op_counter("aten::multi_margin_loss_backward", "", ExecutionTier::kNative);
  auto fn = [&](const at::Tensor& g, const at::Tensor& x, const at::Tensor& t, const std::optional<at::Tensor>& w) {
    return at::multi_margin_loss_backward(up(g), up(x), t, p, margin, up(w), reduction).to(x.scalar_type());
  };
  return run_on_host<at::Tensor>("aten::multi_margin_loss_backward", counter, fn, grad_output, self, target, weight);
}

std::tuple<at::Tensor, at::Tensor> multilabel_margin_loss_forward(const at::Tensor& self, const at::Tensor& target,
                                                                  int64_t reduction) {
  static OpCounter* counter = op_counter("aten::multilabel_margin_loss_forward", "", ExecutionTier::kNative);
  auto fn = [&](const at::Tensor& x, const at::Tensor& t) {
    auto [out, is_target] = at::multilabel_margin_loss_forward(up(x), t, reduction);
    return std::tuple<at::Tensor, at::Tensor>(out.to(x.scalar_type()), is_target.to(x.scalar_type()));
  };
  return run_on_host<std::tuple<at::Tensor, at::Tensor>>("aten::multilabel_margin_loss_forward", counter, fn, self,
                                                         target);
}

at::Tensor multilabel_margin_loss_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                           const at::Tensor& target, int64_t reduction, const at::Tensor& is_target) {
  static OpCounter* counter = op_counter("aten::multilabel_margin_loss_backward", "", ExecutionTier::kNative);
  auto fn = [&](const at::Tensor& g, const at::Tensor& x, const at::Tensor& t, const at::Tensor& it) {
    return at::multilabel_margin_loss_backward(up(g), up(x), t, reduction, up(it)).to(x.scalar_type());
  };
  return run_on_host<at::Tensor>("aten::multilabel_margin_loss_backward", counter, fn, grad_output, self, target,
                                 is_target);
}

}  // namespace
}  // namespace torchneuron

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", TORCH_FN(torchneuron::convolution_overrideable));
  m.impl("convolution_backward_overrideable", TORCH_FN(torchneuron::convolution_backward_overrideable));
  m.impl("histc", TORCH_FN(torchneuron::histc));
  m.impl("histc.out", TORCH_FN(torchneuron::histc_out));
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(torchneuron::fused_lstm_cell));
  m.impl("_thnn_fused_lstm_cell_backward_impl", TORCH_FN(torchneuron::fused_lstm_cell_backward));
  m.impl("_thnn_fused_gru_cell", TORCH_FN(torchneuron::fused_gru_cell));
  m.impl("_thnn_fused_gru_cell_backward", TORCH_FN(torchneuron::fused_gru_cell_backward));
  m.impl("avg_pool3d", TORCH_FN(torchneuron::avg_pool3d));
  m.impl("avg_pool3d_backward", TORCH_FN(torchneuron::avg_pool3d_backward));
  m.impl("_upsample_bilinear2d_aa", TORCH_FN(torchneuron::upsample_bilinear2d_aa));
  m.impl("_upsample_bilinear2d_aa_backward", TORCH_FN(torchneuron::upsample_bilinear2d_aa_backward));
  m.impl("multi_margin_loss", TORCH_FN(torchneuron::multi_margin_loss));
  m.impl("multi_margin_loss_backward", TORCH_FN(torchneuron::multi_margin_loss_backward));
  m.impl("multilabel_margin_loss_forward", TORCH_FN(torchneuron::multilabel_margin_loss_forward));
  m.impl("multilabel_margin_loss_backward", TORCH_FN(torchneuron::multilabel_margin_loss_backward));
}
