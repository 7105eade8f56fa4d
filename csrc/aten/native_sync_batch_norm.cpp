// The operators of nn.SyncBatchNorm (torch/nn/modules/_functions.py):
// per-rank statistics, their combination across ranks, the normalization and
// its backward. Only CUDA implements them (the CPU has none, so the generic
// path cannot serve them); neuron computes what CUDA's kernels compute
// (aten/src/ATen/native/cuda/Normalization.cu/.cuh), with CUDA's dtypes:
// statistics in the accumulate type (float for half / bfloat16 inputs, else
// the input's dtype), element-wise results rounded once to the input's dtype.
// The .out forms ATen generates around the functional ones reach these
// kernels through host_kernel_routing.cpp; batch_norm_elemt.out, which CUDA
// implements itself, is here.
#include <ATen/Dispatch.h>
#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <ATen/native/Resize.h>
#include <c10/util/irange.h>
#include <torch/library.h>

#include <tuple>
#include <vector>

#include "host_compute.h"

namespace torchneuron {
namespace {

using Tensor2 = std::tuple<at::Tensor, at::Tensor>;
using Tensor4 = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

bool defined(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

at::ScalarType acc_type(at::ScalarType t) {
  return (t == at::kHalf || t == at::kBFloat16) ? at::kFloat : t;
}

// CUDA dispatches these kernels over float, double, half and bfloat16 only.
void check_floating(const at::Tensor& t, const char* op) {
  const auto s = t.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(s == at::kFloat || s == at::kDouble || s == at::kHalf || s == at::kBFloat16, "\"",
                              op, "\" not implemented for '", c10::toString(s), "'");
}

void check_input(const at::Tensor& input, const char* op) {
  TORCH_CHECK(input.dim() >= 2, op, ": expected an input of shape (N, C, ...) with at least 2 dimensions, got ",
              input.dim(), " (shape ", input.sizes(), ")");
  check_floating(input, op);
}

void check_per_channel(const at::Tensor& t, int64_t channels, const char* what, const char* op) {
  TORCH_CHECK(t.dim() == 1 && t.size(0) == channels, op, ": expected ", what,
              " to hold one value per channel (shape [", channels, "]), got shape ", t.sizes());
}

void check_same_stat_dtype(const at::Tensor& mean, const at::Tensor& invstd) {
  TORCH_CHECK(mean.scalar_type() == invstd.scalar_type(), "mean and invstd need to have the same data types");
}

// Every dimension but the channel dimension (1): what the statistics reduce.
std::vector<int64_t> reduced_dims(const at::Tensor& input) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < input.dim(); ++d) dims.push_back(d);
  return dims;
}

// A per-channel vector shaped to broadcast against the input.
at::Tensor per_channel(const at::Tensor& v, const at::Tensor& input, at::ScalarType dtype) {
  std::vector<int64_t> shape(input.dim(), 1);
  shape[1] = v.size(0);
  return v.to(dtype).view(shape);
}

// CUDA's InvStd: 0 where both the variance and epsilon are 0, not infinity.
at::Tensor inv_std(const at::Tensor& var, double eps) {
  at::Tensor invstd = (var + eps).rsqrt();
  if (eps == 0) invstd.masked_fill_(var == 0, 0);
  return invstd;
}

Tensor2 stats_on_host(const at::Tensor& input, double eps) {
  check_input(input, "batch_norm_stats");
  auto [var, mean] = at::var_mean(input.to(acc_type(input.scalar_type())), reduced_dims(input), /*correction=*/0);
  return {mean, inv_std(var, eps)};
}

at::Tensor elemt_on_host(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                         const std::optional<at::Tensor>& bias, const at::Tensor& mean, const at::Tensor& invstd) {
  check_input(input, "batch_norm_elemt");
  const int64_t c = input.size(1);
  check_per_channel(mean, c, "mean", "batch_norm_elemt");
  check_per_channel(invstd, c, "invstd", "batch_norm_elemt");
  if (defined(weight)) check_per_channel(*weight, c, "weight", "batch_norm_elemt");
  if (defined(bias)) check_per_channel(*bias, c, "bias", "batch_norm_elemt");
  const auto acc = acc_type(input.scalar_type());
  at::Tensor y = (input.to(acc) - per_channel(mean, input, acc)) * per_channel(invstd, input, acc);
  if (defined(weight)) y.mul_(per_channel(*weight, input, acc));
  if (defined(bias)) y.add_(per_channel(*bias, input, acc));
  return y.to(input.scalar_type()).contiguous(input.suggest_memory_format());
}

// Chan et al.'s pairwise combination of (count, mean, M2), rank after rank in
// rank order, as CUDA's batch_norm_reduce_statistics_kernel does; each rank's
// M2 is recovered from its invstd and epsilon. The running statistics are
// updated in place (the variance unbiased over the global count).
Tensor2 gather_stats_on_host(const at::Tensor& input, const at::Tensor& mean, const at::Tensor& invstd,
                             const std::optional<at::Tensor>& running_mean,
                             const std::optional<at::Tensor>& running_var, double momentum, double eps,
                             const at::Tensor& counts) {
  const char* op = "batch_norm_gather_stats_with_counts";
  check_floating(input, op);
  check_same_stat_dtype(mean, invstd);
  TORCH_CHECK(mean.dim() == 2 && invstd.sizes() == mean.sizes(), op,
              ": expected mean and invstd of shape [world_size, channels] (one row per rank), got ", mean.sizes(),
              " and ", invstd.sizes());
  const int64_t world = mean.size(0), c = mean.size(1);
  TORCH_CHECK(counts.dim() == 1 && counts.size(0) == world, op, ": expected counts to hold one count per rank (shape [",
              world, "]), got shape ", counts.sizes());
  TORCH_CHECK(defined(running_mean) == defined(running_var), op,
              ": running_mean and running_var must both be given or both be None");
  if (defined(running_mean)) {
    check_per_channel(*running_mean, c, "running_mean", op);
    check_per_channel(*running_var, c, "running_var", op);
  }
  const auto acc = acc_type(mean.scalar_type());
  const at::Tensor m_all = mean.to(acc), invstd_all = invstd.to(acc);
  const at::Tensor count_values = counts.to(at::kDouble).contiguous();
  const double* count_of = count_values.const_data_ptr<double>();
  at::Tensor avg = at::zeros({c}, m_all.options()), var_n = at::zeros({c}, m_all.options());
  int64_t n = 0;  // an integer in CUDA's kernel: each count is truncated when added
  for (const auto j : c10::irange(world)) {
    const double count = count_of[j];
    const at::Tensor m = m_all[j];
    const at::Tensor v = (invstd_all[j].reciprocal().square() - eps) * count;
    const double factor = 1.0 / (static_cast<double>(n) + count);
    var_n.add_(v + (avg - m).square() * (static_cast<double>(n) * count * factor));
    avg = avg * (static_cast<double>(n) * factor) + m * (count * factor);
    n += static_cast<int64_t>(count);
  }
  at::Tensor invstd_out = (var_n / static_cast<double>(n) + eps).rsqrt();
  if (defined(running_mean)) {
    running_mean->copy_(running_mean->to(acc) * (1 - momentum) + avg * momentum);
    const at::Tensor unbiased = var_n / static_cast<double>(n - 1);
    running_var->copy_(running_var->to(acc) * (1 - momentum) + unbiased * momentum);
  }
  return {avg, invstd_out};
}

// The arguments both backward kernels share; answers the channel count.
int64_t check_backward_args(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean,
                            const at::Tensor& invstd, const char* op) {
  check_input(input, op);
  check_same_stat_dtype(mean, invstd);
  TORCH_CHECK(grad_out.sizes() == input.sizes(), op, ": expected grad_out of the input's shape ", input.sizes(),
              ", got ", grad_out.sizes());
  const int64_t c = input.size(1);
  check_per_channel(mean, c, "mean", op);
  check_per_channel(invstd, c, "invstd", op);
  return c;
}

// Per channel: sum(dy) and sum(dy * (x - mean)); the weight and bias
// gradients are sum(dy * (x - mean)) * invstd and sum(dy), in the weight's dtype.
Tensor4 backward_reduce_on_host(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean,
                                const at::Tensor& invstd, const std::optional<at::Tensor>& weight, bool input_g,
                                bool weight_g, bool bias_g) {
  const char* op = "batch_norm_backward_reduce";
  const int64_t c = check_backward_args(grad_out, input, mean, invstd, op);
  if (defined(weight)) check_per_channel(*weight, c, "weight", op);
  const auto acc = mean.scalar_type();
  const auto dims = reduced_dims(input);
  const at::Tensor dy = grad_out.to(acc);
  const at::Tensor sum_dy = dy.sum(dims);
  const at::Tensor sum_dy_xmu = (dy * (input.to(acc) - per_channel(mean, input, acc))).sum(dims);
  const auto param_dtype = defined(weight) ? weight->scalar_type() : input.scalar_type();
  return {input_g ? sum_dy : at::Tensor(), input_g ? sum_dy_xmu : at::Tensor(),
          weight_g ? (sum_dy_xmu * invstd.to(acc)).to(param_dtype) : at::Tensor(),
          bias_g ? sum_dy.to(param_dtype) : at::Tensor()};
}

// dx = (dy - sum_dy / N - (x - mean) * invstd^2 * sum_dy_xmu / N) * weight * invstd,
// N the element count per channel over all ranks (the sum of `count`).
at::Tensor backward_elemt_on_host(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean,
                                  const at::Tensor& invstd, const std::optional<at::Tensor>& weight,
                                  const at::Tensor& sum_dy, const at::Tensor& sum_dy_xmu, const at::Tensor& count) {
  const char* op = "batch_norm_backward_elemt";
  const int64_t c = check_backward_args(grad_out, input, mean, invstd, op);
  check_per_channel(sum_dy, c, "sum_dy", op);
  check_per_channel(sum_dy_xmu, c, "sum_dy_xmu", op);
  if (defined(weight)) check_per_channel(*weight, c, "weight", op);
  TORCH_CHECK(at::isIntegralType(count.scalar_type(), /*includeBool=*/false), op,
              ": expected count to be an integer tensor of per-rank element counts (SyncBatchNorm passes int32), got ",
              count.scalar_type());
  const int64_t total = count.sum(at::kLong).item<int64_t>();
  const auto acc = mean.scalar_type();
  const double norm = 1.0 / static_cast<double>(total);
  const at::Tensor inv = per_channel(invstd, input, acc);
  const at::Tensor mean_dy = per_channel(sum_dy, input, acc) * norm;
  const at::Tensor proj = inv.square() * per_channel(sum_dy_xmu, input, acc) * norm;
  at::Tensor scale = defined(weight) ? per_channel(*weight, input, acc) * inv : inv;
  at::Tensor dx = (grad_out.to(acc) - mean_dy - (input.to(acc) - per_channel(mean, input, acc)) * proj) * scale;
  return dx.to(grad_out.scalar_type()).contiguous(input.suggest_memory_format());
}

Tensor2 batch_norm_stats(const at::Tensor& input, double eps) {
  static OpCounter* counter = op_counter("aten::batch_norm_stats", "", ExecutionTier::kNative);
  auto fn = [eps](const at::Tensor& x) { return stats_on_host(x, eps); };
  return run_on_host<Tensor2>("aten::batch_norm_stats", counter, fn, input);
}

at::Tensor batch_norm_elemt(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                            const std::optional<at::Tensor>& bias, const at::Tensor& mean, const at::Tensor& invstd,
                            double /*eps: CUDA's kernel ignores it too (invstd already holds it)*/) {
  static OpCounter* counter = op_counter("aten::batch_norm_elemt", "", ExecutionTier::kNative);
  return run_on_host<at::Tensor>("aten::batch_norm_elemt", counter, &elemt_on_host, input, weight, bias, mean,
                                 invstd);
}

at::Tensor& batch_norm_elemt_out(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                                 const std::optional<at::Tensor>& bias, const at::Tensor& mean,
                                 const at::Tensor& invstd, double /*eps*/, at::Tensor& out) {
  static OpCounter* counter = op_counter("aten::batch_norm_elemt", "out", ExecutionTier::kNative);
  counter->increment();
  KernelCall c("aten::batch_norm_elemt", "out");
  c.note(input);
  c.note(weight);
  c.note(bias);
  c.note(mean);
  c.note(invstd);
  c.note(out);
  CurrentDeviceScope scope(c.resolve());
  at::Tensor& out_host = c.host(out);
  {
    KernelAllocationScope alloc;
    KernelSpan span(c);
    at::Tensor y = elemt_on_host(c.host(input), c.host(weight), c.host(bias), c.host(mean), c.host(invstd));
    at::native::resize_output(out_host, y.sizes());
    out_host.copy_(y);
  }
  c.sync_arguments();
  at::Tensor& result = c.to_device_ref(out_host);
  c.finish(counter);
  return result;
}

Tensor2 batch_norm_gather_stats_with_counts(const at::Tensor& input, const at::Tensor& mean, const at::Tensor& invstd,
                                            const std::optional<at::Tensor>& running_mean,
                                            const std::optional<at::Tensor>& running_var, double momentum, double eps,
                                            const at::Tensor& counts) {
  static OpCounter* counter = op_counter("aten::batch_norm_gather_stats_with_counts", "", ExecutionTier::kNative);
  auto fn = [momentum, eps](const at::Tensor& x, const at::Tensor& m, const at::Tensor& s,
                            const std::optional<at::Tensor>& rm, const std::optional<at::Tensor>& rv,
                            const at::Tensor& n) { return gather_stats_on_host(x, m, s, rm, rv, momentum, eps, n); };
  return run_on_host<Tensor2>("aten::batch_norm_gather_stats_with_counts", counter, fn, input, mean, invstd,
                              running_mean, running_var, counts);
}

// The same with one count for every rank (CUDA builds the counts vector).
Tensor2 batch_norm_gather_stats(const at::Tensor& input, const at::Tensor& mean, const at::Tensor& invstd,
                                const std::optional<at::Tensor>& running_mean,
                                const std::optional<at::Tensor>& running_var, double momentum, double eps,
                                int64_t count) {
  static OpCounter* counter = op_counter("aten::batch_norm_gather_stats", "", ExecutionTier::kNative);
  auto fn = [momentum, eps, count](const at::Tensor& x, const at::Tensor& m, const at::Tensor& s,
                                   const std::optional<at::Tensor>& rm, const std::optional<at::Tensor>& rv) {
    TORCH_CHECK(m.dim() >= 1, "batch_norm_gather_stats: expected mean of shape [world_size, channels], got ",
                m.sizes());
    const at::Tensor counts = at::full({m.size(0)}, static_cast<double>(count), m.options().dtype(at::kDouble));
    return gather_stats_on_host(x, m, s, rm, rv, momentum, eps, counts);
  };
  return run_on_host<Tensor2>("aten::batch_norm_gather_stats", counter, fn, input, mean, invstd, running_mean,
                              running_var);
}

Tensor4 batch_norm_backward_reduce(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean,
                                   const at::Tensor& invstd, const std::optional<at::Tensor>& weight, bool input_g,
                                   bool weight_g, bool bias_g) {
  static OpCounter* counter = op_counter("aten::batch_norm_backward_reduce", "", ExecutionTier::kNative);
  auto fn = [=](const at::Tensor& g, const at::Tensor& x, const at::Tensor& m, const at::Tensor& s,
                const std::optional<at::Tensor>& w) {
    return backward_reduce_on_host(g, x, m, s, w, input_g, weight_g, bias_g);
  };
  return run_on_host<Tensor4>("aten::batch_norm_backward_reduce", counter, fn, grad_out, input, mean, invstd, weight);
}

at::Tensor batch_norm_backward_elemt(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean,
                                     const at::Tensor& invstd, const std::optional<at::Tensor>& weight,
                                     const at::Tensor& sum_dy, const at::Tensor& sum_dy_xmu, const at::Tensor& count) {
  static OpCounter* counter = op_counter("aten::batch_norm_backward_elemt", "", ExecutionTier::kNative);
  return run_on_host<at::Tensor>("aten::batch_norm_backward_elemt", counter, &backward_elemt_on_host, grad_out, input,
                                 mean, invstd, weight, sum_dy, sum_dy_xmu, count);
}

}  // namespace
}  // namespace torchneuron

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("batch_norm_stats", TORCH_FN(torchneuron::batch_norm_stats));
  m.impl("batch_norm_elemt", TORCH_FN(torchneuron::batch_norm_elemt));
  m.impl("batch_norm_elemt.out", TORCH_FN(torchneuron::batch_norm_elemt_out));
  m.impl("batch_norm_gather_stats_with_counts", TORCH_FN(torchneuron::batch_norm_gather_stats_with_counts));
  m.impl("batch_norm_gather_stats", TORCH_FN(torchneuron::batch_norm_gather_stats));
  m.impl("batch_norm_backward_reduce", TORCH_FN(torchneuron::batch_norm_backward_reduce));
  m.impl("batch_norm_backward_elemt", TORCH_FN(torchneuron::batch_norm_backward_elemt));
}
