// FLOP estimates of device activities, for the timing tables and the cost
// model (which puts multiply-adds on the Tensor Engine). One place for every
// producer: the kernel wrapper asks by operator name, the convolutions give
// their operands. 2 FLOPs per multiply-add. Other operators count 0: their
// time is the bytes they move and the elements they touch (docs/cost_model.md).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <string_view>

namespace torchneuron {

// `operands` in argument order: mm/bmm/mv/dot (a, b); addmm/baddbmm/addbmm/addmv
// (bias, a, b); the fused attention forwards (q, k, ...) and backwards
// (grad_out, q, k, ...). 0 for nested operands.
int64_t estimate_flops(std::string_view op, c10::ArrayRef<const at::Tensor*> operands);

// A convolution's: every element of the larger side (the output, or a
// transposed convolution's input) times the weight's (channels / groups) x
// kernel size.
int64_t convolution_flops(const at::Tensor& larger_side, const at::Tensor& weight);

}  // namespace torchneuron
