// Native kernels that are not a plain redispatch to the CPU kernel of the
// same operator: PyTorch routes these through "overrideable" entry points or
// per-device stubs for backends other than CPU and CUDA, or CUDA accepts
// inputs the CPU kernel refuses.
#include <ATen/Dispatch.h>
#include <ATen/Functions.h>
#include <ATen/native/Resize.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_fused_sdp_choice_native.h>
#include <torch/library.h>

#include "kernel_wrapper.h"

namespace torchneuron {
namespace {

// Convolutions on backends other than CPU/CUDA reach convolution_overrideable;
// here it runs the CPU's convolution (oneDNN and all) on zero-copy views.
at::Tensor convolution_overrideable(const at::Tensor& input, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias, c10::IntArrayRef stride,
                                    c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
                                    c10::IntArrayRef output_padding, int64_t groups) {
  static OpCounter* counter = op_counter("aten::convolution_overrideable", "", ExecutionTier::kNative);
  counter->increment();
  KernelCall c("aten::convolution_overrideable", "");
  c.note(input);
  c.note(weight);
  c.note(bias);
  CurrentDeviceScope scope(c.resolve());
  at::Tensor out;
  {
    KernelAllocationScope alloc;
    KernelSpan span(c);
    out = at::convolution(c.host(input), c.host(weight), c.host(bias), stride, padding, dilation, transposed,
                          output_padding, groups);
  }
  at::Tensor result = c.to_device(out);
  c.finish(counter);
  return result;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_overrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
    c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed, c10::IntArrayRef output_padding,
    int64_t groups, std::array<bool, 3> output_mask) {
  static OpCounter* counter = op_counter("aten::convolution_backward_overrideable", "", ExecutionTier::kNative);
  counter->increment();
  KernelCall c("aten::convolution_backward_overrideable", "");
  c.note(grad_output);
  c.note(input);
  c.note(weight);
  CurrentDeviceScope scope(c.resolve());
  std::tuple<at::Tensor, at::Tensor, at::Tensor> grads;
  {
    KernelAllocationScope alloc;
    KernelSpan span(c);
    std::vector<int64_t> bias_sizes{grad_output.size(1)};
    grads = at::convolution_backward(c.host(grad_output), c.host(input), c.host(weight),
                                     output_mask[2] ? c10::OptionalIntArrayRef(bias_sizes) : std::nullopt, stride,
                                     padding, dilation, transposed, output_padding, groups, output_mask);
  }
  std::tuple<at::Tensor, at::Tensor, at::Tensor> result{c.to_device(std::get<0>(grads)),
                                                        c.to_device(std::get<1>(grads)),
                                                        c.to_device(std::get<2>(grads))};
  c.finish(counter);
  return result;
}

// scaled_dot_product_attention picks its backend through a per-device stub;
// answering as the CPU does sends neuron to the CPU's fused flash kernel
// (_scaled_dot_product_flash_attention_for_cpu, native tier) instead of the
// unfused math path.
int64_t sdp_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                   const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                   std::optional<double> scale, bool enable_gqa) {
  // The choice depends on shapes, strides and dtypes only, so it is made on
  // meta tensors: that also serves FakeTensor tracing (torch.compile), whose
  // tensors have no data to view.
  auto meta = [](const at::Tensor& t) {
    // requires_grad is part of the choice (the fused CPU kernel has no gradient for the mask).
    return at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::DeviceType::Meta))
        .requires_grad_(t.requires_grad());
  };
  std::optional<at::Tensor> mask;
  if (attn_mask.has_value() && attn_mask->defined()) mask = meta(*attn_mask);
  return at::native::_fused_sdp_choice_cpp(meta(query), meta(key), meta(value), mask, dropout_p, is_causal, scale,
                                           enable_gqa);
}

// CUDA's histc takes integer tensors (counts come back in the input's dtype) and
// the CPU kernel does not; libraries that treat neuron like CUDA rely on it
// (Hugging Face's mixture-of-experts routing counts expert ids with it). The
// integer path follows CUDA's kernel: bounds are cast to the input's type, an
// empty range is taken from the data, then widened by one on each side, and
// bin = (x - min) * bins / (max - min) in integer arithmetic, the top edge
// falling into the last bin.
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
  at::Tensor v = x.reshape({-1}).to(at::kLong);
  v = v.masked_select(v.ge(lo).logical_and_(v.le(hi)));
  at::Tensor bin = v.sub(lo).mul_(bins).div_(hi - lo, "floor").clamp_max_(bins - 1);
  return at::bincount(bin, /*weights=*/{}, bins).to(x.scalar_type());
}

at::Tensor histc(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max) {
  static OpCounter* counter = op_counter("aten::histc", "", ExecutionTier::kNative);
  counter->increment();
  KernelCall c("aten::histc", "");
  c.note(self);
  CurrentDeviceScope scope(c.resolve());
  at::Tensor out;
  {
    KernelAllocationScope alloc;
    KernelSpan span(c);
    out = histc_on_host(c.host(self), bins, min, max);
  }
  at::Tensor result = c.to_device(out);
  c.finish(counter);
  return result;
}

at::Tensor& histc_out(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max,
                      at::Tensor& out) {
  static OpCounter* counter = op_counter("aten::histc", "out", ExecutionTier::kNative);
  counter->increment();
  KernelCall c("aten::histc", "out");
  c.note(self);
  c.note(out);
  CurrentDeviceScope scope(c.resolve());
  TORCH_CHECK(out.device().type() == c10::DeviceType::PrivateUse1, "Expected out tensor to have device ",
              self.device(), ", but got out.device() = ", out.device());
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "torch.histc: input tensor and output tensor should have ",
              "the same dtype, but got input ", self.scalar_type(), " and output ", out.scalar_type());
  at::Tensor& host_out = c.host(out);
  {
    KernelAllocationScope alloc;
    KernelSpan span(c);
    at::Tensor r = histc_on_host(c.host(self), bins, min, max);
    at::native::resize_output(host_out, r.sizes());
    host_out.copy_(r);
  }
  c.sync_arguments();
  at::Tensor& result = c.to_device_ref(host_out);
  c.finish(counter);
  return result;
}

}  // namespace
}  // namespace torchneuron

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torchneuron::sdp_choice)
}  // namespace at::native

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", TORCH_FN(torchneuron::convolution_overrideable));
  m.impl("convolution_backward_overrideable", TORCH_FN(torchneuron::convolution_backward_overrideable));
  m.impl("histc", TORCH_FN(torchneuron::histc));
  m.impl("histc.out", TORCH_FN(torchneuron::histc_out));
}
