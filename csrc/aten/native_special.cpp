// Native kernels that are not a plain redispatch to the CPU kernel of the
// same operator: PyTorch routes these through "overrideable" entry points or
// per-device stubs for backends other than CPU and CUDA.
#include <ATen/Functions.h>
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

}  // namespace
}  // namespace torchneuron

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torchneuron::sdp_choice)
}  // namespace at::native

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", TORCH_FN(torchneuron::convolution_overrideable));
  m.impl("convolution_backward_overrideable", TORCH_FN(torchneuron::convolution_backward_overrideable));
}
