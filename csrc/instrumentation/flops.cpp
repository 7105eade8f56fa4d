#include "flops.h"

#include <algorithm>

namespace torchneuron {

int64_t estimate_flops(std::string_view n, c10::ArrayRef<const at::Tensor*> operands) {
  auto tensor = [&](size_t i) -> const at::Tensor* { return i < operands.size() ? operands[i] : nullptr; };
  const bool with_bias = n == "aten::addmm" || n == "aten::addmm_" || n == "aten::baddbmm" ||
                         n == "aten::baddbmm_" || n == "aten::addbmm" || n == "aten::addmv" || n == "aten::addmv_";
  if (n == "aten::mm" || n == "aten::bmm" || n == "aten::mv" || n == "aten::dot" || with_bias) {
    const at::Tensor* a = tensor(with_bias ? 1 : 0);
    const at::Tensor* b = tensor(with_bias ? 2 : 1);
    // A nested operand's components differ in size: not estimated.
    if (a == nullptr || b == nullptr || a->dim() == 0 || a->is_nested() || b->is_nested()) return 0;
    const int64_t k = a->size(-1);
    // out elements x K multiply-adds; output elements are numel(a)/K * (last dim of b, or 1 for a vector).
    const int64_t n_cols = b->dim() >= 2 ? b->size(-1) : 1;
    return 2 * (a->numel() / std::max<int64_t>(k, 1)) * n_cols * k;
  }
  // Attention: QK^T and PV, 2 FLOPs per multiply-add each; the backward's four products (dV, dP, dQ,
  // dK) twice that. A backward's first argument is the output's gradient.
  const bool attention_fwd = n == "aten::_scaled_dot_product_flash_attention_for_cpu" ||
                             n == "aten::_scaled_dot_product_fused_attention_overrideable";
  const bool attention_bwd = n == "aten::_scaled_dot_product_flash_attention_for_cpu_backward" ||
                             n == "aten::_scaled_dot_product_fused_attention_overrideable_backward";
  if ((attention_fwd || attention_bwd) && operands.size() >= (attention_bwd ? 3u : 2u)) {
    const at::Tensor* q = tensor(attention_bwd ? 1 : 0);  // (B, H, L, D) and k (B, H, S, D)
    const at::Tensor* k = tensor(attention_bwd ? 2 : 1);
    if (q == nullptr || k == nullptr || q->is_nested() || k->is_nested() || q->dim() != 4 || k->dim() != 4) return 0;
    return (attention_bwd ? 8 : 4) * q->size(0) * q->size(1) * q->size(2) * k->size(2) * q->size(3);
  }
  return 0;
}

int64_t convolution_flops(const at::Tensor& larger_side, const at::Tensor& weight) {
  if (weight.dim() < 2) return 0;
  int64_t per_element = 1;
  for (int64_t i = 1; i < weight.dim(); ++i) per_element *= weight.size(i);
  return 2 * larger_side.numel() * per_element;
}

}  // namespace torchneuron
