// scaled_dot_product_attention on neuron, as TorchNeuron runs it: its
// _fused_sdp_choice answers "overrideable" for 4-D query/key/value on the
// device, so SDPA is one operator, _scaled_dot_product_fused_attention_overrideable,
// with its own backward (_scaled_dot_product_fused_attention_overrideable_backward,
// derivatives.yaml), each one device kernel here. (TorchNeuron's
// torch_neuronx/csrc/aten/SdpBackendSelection.cpp; PyTorch's OpenReg backend
// registers the same pair.)
//
// The kernels compute with the CPU's own attention kernels on host views, so
// results are the CPU's: the CPU's flash kernel where the CPU itself would
// choose it (no dropout, no grouped-query heads, a mask that needs no
// gradient), otherwise the CPU's math kernel step by step forward and its
// gradient formula written out backward. Dropout draws at::dropout's noise from
// the device's generator, so a seeded program draws the CPU's mask (as every
// random op here does). Under autograd the math path hands its softmax weights
// and noise to the backward in cum_seq_q / cum_seq_k (undefined for dense
// inputs otherwise), as the CPU's decomposition saves them; without them (a
// compiled graph) the backward recomputes the weights and redraws the noise
// from the generator state that travels in the storage of philox_seed (a 0-dim
// int64 view, as the meta kernel has it; philox_offset is 0). GQA: key and
// value may have fewer heads than the query when they divide its count (the
// choice sends enable_gqa=False with unequal heads to the CPU's choice, and so
// to the CPU's error). The host ops inside are the kernels' internals, hidden
// from the profiler as a NEFF's instructions are.
#include <ATen/Context.h>
#include <ATen/EmptyTensor.h>
#include <ATen/Functions.h>
#include <ATen/OpMathType.h>
#include <ATen/TensorOperators.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_fused_sdp_choice_native.h>
#include <ATen/record_function.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "host_compute.h"

namespace torchneuron {
namespace sdpa_overrideable {

constexpr int64_t kSdpMath = 0;
constexpr int64_t kSdpFlash = 1;
constexpr int64_t kSdpOverrideable = 4;

at::Tensor meta_like(const at::Tensor& t, bool requires_grad) {
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::DeviceType::Meta))
      .requires_grad_(requires_grad);
}

// The CPU's own choice for these inputs. It depends on shapes, strides, dtypes and
// requires_grad only, so it is made on meta tensors: that also serves FakeTensor
// tracing (torch.compile), whose tensors have no data to view.
int64_t cpu_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                   const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                   std::optional<double> scale, bool enable_gqa, std::array<bool, 4> requires_grad) {
  std::optional<at::Tensor> mask;
  // requires_grad is part of the choice (the CPU's flash kernel has no gradient for the mask).
  if (attn_mask.has_value() && attn_mask->defined()) mask = meta_like(*attn_mask, requires_grad[3]);
  return at::native::_fused_sdp_choice_cpp(meta_like(query, requires_grad[0]), meta_like(key, requires_grad[1]),
                                           meta_like(value, requires_grad[2]), mask, dropout_p, is_causal, scale,
                                           enable_gqa);
}

bool same(const c10::SymInt& a, const c10::SymInt& b) { return a == b; }  // guards a symbolic size

// TorchNeuron: a neuron device with 4-D query/key/value takes the overrideable backend.
// Here also only when it is enabled (torch.nn.attention.sdpa_kernel) and the heads are
// ones the kernel takes; anything else gets the CPU's choice (flash or math), as before.
int64_t sdp_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                   const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                   std::optional<double> scale, bool enable_gqa) {
  const bool dense_4d = query.dim() == 4 && key.dim() == 4 && value.dim() == 4 && !query.is_nested() &&
                        !key.is_nested() && !value.is_nested() && query.layout() == c10::kStrided;
  if (dense_4d && at::globalContext().userEnabledOverrideableSDP()) {
    const c10::SymInt hq = query.sym_size(1), hk = key.sym_size(1);
    const bool heads = same(hk, value.sym_size(1)) &&
                       (same(hq, hk) || (enable_gqa && hk > 0 &&
                                         same(hq % hk, c10::SymInt(0))));
    const bool shapes = same(query.sym_size(0), key.sym_size(0)) && same(key.sym_size(0), value.sym_size(0)) &&
                        same(key.sym_size(2), value.sym_size(2)) && same(query.sym_size(3), key.sym_size(3));
    if (heads && shapes) return kSdpOverrideable;
  }
  const bool mask_grad = attn_mask.has_value() && attn_mask->defined() && attn_mask->requires_grad();
  return cpu_choice(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa,
                    {query.requires_grad(), key.requires_grad(), value.requires_grad(), mask_grad});
}

// What the CPU's choice depends on, written into `k`. A model asks it for the same shapes in every
// layer and step, so cpu_would_use_flash keeps its last few answers per thread (asking builds four meta
// tensors: 6 us of the kernel's overhead on a T5-shaped call, measured).
void flash_choice_key(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                      const std::optional<at::Tensor>& attn_mask, bool is_causal, std::optional<double> scale,
                      std::array<bool, 4> requires_grad, std::vector<int64_t>& k) {
  const at::Context& ctx = at::globalContext();
  k.clear();
  for (int64_t flag : {int64_t(is_causal), int64_t(scale.has_value()), int64_t(ctx.userEnabledMathSDP()),
                       int64_t(ctx.userEnabledMemEfficientSDP()), int64_t(ctx.userEnabledCuDNNSDP()),
                       int64_t(ctx.deterministicAlgorithms())}) {
    k.push_back(flag);
  }
  if (scale.has_value()) {
    int64_t bits = 0;
    std::memcpy(&bits, &*scale, sizeof(bits));
    k.push_back(bits);
  }
  auto add = [&](const at::Tensor& t, bool grad) {
    k.push_back(t.dim());
    k.push_back(static_cast<int64_t>(t.scalar_type()));
    k.push_back(grad);
    for (int64_t d : t.sizes()) k.push_back(d);
    for (int64_t d : t.strides()) k.push_back(d);
  };
  add(query, requires_grad[0]);
  add(key, requires_grad[1]);
  add(value, requires_grad[2]);
  if (attn_mask.has_value() && attn_mask->defined()) add(*attn_mask, requires_grad[3]);
}

// Whether the CPU would run its flash kernel for these inputs (the kernels then run
// it too, so the numbers are the CPU's). Not when the user's sdpa_kernel(...) turned
// the CPU's flash backend off: then the CPU's math kernel, which no switch turns off.
bool cpu_would_use_flash(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                         const std::optional<at::Tensor>& attn_mask, bool is_causal, std::optional<double> scale,
                         std::array<bool, 4> requires_grad) {
  if (!at::globalContext().userEnabledFlashSDP()) return false;
  // The last few answers per thread: one model asks for several inputs in turn (T5's encoder, decoder
  // and cross attention; a forward and its backward). Found entries move to the front; a miss replaces
  // the oldest, whose buffer is reused, so a call allocates nothing once the buffers have grown.
  struct Entry {
    std::vector<int64_t> key;
    bool answer = false;
  };
  constexpr size_t kEntries = 8;
  thread_local std::vector<int64_t> k;
  thread_local std::vector<Entry> kept;
  flash_choice_key(query, key, value, attn_mask, is_causal, scale, requires_grad, k);
  for (size_t i = 0; i < kept.size(); ++i) {
    if (kept[i].key == k) {
      std::rotate(kept.begin(), kept.begin() + static_cast<std::ptrdiff_t>(i),
                  kept.begin() + static_cast<std::ptrdiff_t>(i) + 1);
      return kept.front().answer;
    }
  }
  bool answer = false;
  try {
    answer = cpu_choice(query, key, value, attn_mask, 0.0, is_causal, scale, false, requires_grad) == kSdpFlash;
  } catch (const c10::Error&) {  // no CPU backend left enabled (sdpa_kernel without MATH): the math kernel
    answer = false;
  }
  if (kept.size() < kEntries) kept.emplace_back();
  std::rotate(kept.begin(), kept.end() - 1, kept.end());  // the oldest (or the new one) to the front
  kept.front().key.swap(k);
  kept.front().answer = answer;
  return answer;
}

// ---------------------------------------------------------------------------
// Shared pieces of the two kernels (host tensors only).

at::ScalarType opmath_type(at::ScalarType t) {
  return (t == at::kHalf || t == at::kBFloat16) ? at::kFloat : t;
}

struct Geometry {
  int64_t groups;  // query heads per key/value head (1 without GQA)
};

Geometry check_inputs(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  TORCH_CHECK(q.dim() == 3 || q.dim() == 4, op, ": expected query of shape (batch, heads, seq_len, head_dim) or "
              "(heads, seq_len, head_dim), got ", q.sizes());
  TORCH_CHECK(k.dim() == q.dim() && v.dim() == q.dim(), op, ": query, key and value must have the same number of "
              "dimensions, got ", q.sizes(), ", ", k.sizes(), " and ", v.sizes());
  TORCH_CHECK(q.scalar_type() == k.scalar_type() && q.scalar_type() == v.scalar_type(), op,
              ": query, key and value must have one dtype, got ", q.scalar_type(), ", ", k.scalar_type(), " and ",
              v.scalar_type(), ": cast them to one dtype");
  TORCH_CHECK(at::isFloatingType(q.scalar_type()), op, ": expected floating-point query, key and value, got ",
              q.scalar_type());
  if (q.dim() == 4) {
    TORCH_CHECK(q.size(0) == k.size(0) && k.size(0) == v.size(0), op, ": query, key and value must have one batch "
                "size, got ", q.size(0), ", ", k.size(0), " and ", v.size(0));
  }
  const int64_t hq = q.size(-3), hk = k.size(-3);
  TORCH_CHECK(k.size(-3) == v.size(-3) && hk > 0 && hq % hk == 0, op, ": key and value need one head count that "
              "divides the query's (grouped-query attention), got ", hq, " query heads and ", hk, " key and ",
              v.size(-3), " value heads");
  TORCH_CHECK(k.size(-2) == v.size(-2), op, ": key and value must have one sequence length, got ", k.size(-2),
              " and ", v.size(-2));
  TORCH_CHECK(q.size(-1) == k.size(-1), op, ": query and key must have one head dim, got ", q.size(-1), " and ",
              k.size(-1));
  return {hq / hk};
}

double softmax_scale(const at::Tensor& q, std::optional<double> scale) {
  return scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
}

at::Tensor expand_heads(const at::Tensor& t, int64_t groups) {
  return groups == 1 ? t : t.repeat_interleave(groups, /*dim=*/-3);
}

// The CPU's math kernel scales query and key by sqrt(|scale|) (the query's sign carries a negative scale)
// before their product; the gradients below follow the same order.
double query_factor(double scale) { return (scale < 0 ? -1.0 : 1.0) * std::sqrt(std::abs(scale)); }
double key_factor(double scale) { return std::sqrt(std::abs(scale)); }

// q k^T * scale + mask, with the causal (upper-left aligned) -inf, in `ct`.
at::Tensor scores(const at::Tensor& q, const at::Tensor& k_full, const std::optional<at::Tensor>& bias,
                  bool is_causal, double scale, at::ScalarType ct) {
  at::Tensor s = at::matmul(q.to(ct) * query_factor(scale), k_full.to(ct).transpose(-2, -1) * key_factor(scale));
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  if (bias.has_value() && bias->defined()) {
    s = bias->scalar_type() == at::kBool ? s.masked_fill(bias->logical_not(), kNegInf) : s + bias->to(ct);
  }
  if (is_causal) {
    const at::Tensor keep = at::ones({q.size(-2), k_full.size(-2)}, q.options().dtype(at::kBool)).tril();
    s.masked_fill_(keep.logical_not(), kNegInf);
  }
  return s;
}

// The dropout noise of the CPU's math kernel (at::dropout on a CPU tensor: bernoulli_(1 - p) on a tensor
// like the attention weights, divided by 1 - p; zeros for p = 1), drawn from `gen`.
at::Tensor dropout_noise(const at::Generator& gen, c10::IntArrayRef shape, double p, const at::TensorOptions& opts) {
  if (p >= 1.0) return at::zeros(shape, opts);
  return at::empty(shape, opts).bernoulli_(1.0 - p, gen).div_(1.0 - p);
}

// philox_seed of a dropout call: a 0-dim int64 tensor (the state's byte count) whose storage also holds
// the device generator's state from before the forward drew its mask.
at::Tensor pack_generator_state(const at::Tensor& state) {
  const int64_t n = state.numel();
  at::Tensor buf = at::empty({8 + ((n + 7) / 8) * 8}, state.options().dtype(at::kByte));
  std::memcpy(buf.data_ptr<uint8_t>(), &n, sizeof(n));
  std::memcpy(buf.data_ptr<uint8_t>() + 8, state.contiguous().data_ptr<uint8_t>(), static_cast<size_t>(n));
  return buf.view(at::kLong).select(0, 0);
}

at::Generator unpack_generator_state(const char* op, const at::Tensor& philox_seed) {
  const c10::Storage& storage = philox_seed.storage();
  const auto* base = static_cast<const uint8_t*>(storage.data());
  int64_t n = 0;
  const bool ok = philox_seed.scalar_type() == at::kLong && philox_seed.storage_offset() == 0 && base != nullptr &&
                  storage.nbytes() >= 8 && (std::memcpy(&n, base, sizeof(n)), n > 0) &&
                  storage.nbytes() >= static_cast<size_t>(8 + n);
  TORCH_CHECK(ok, op, ": philox_seed does not carry the generator state of a dropout forward (it is not the "
              "philox_seed the forward returned, or a copy of it): pass the forward's philox_seed tensor itself");
  at::Tensor state = at::empty({n}, at::TensorOptions().dtype(at::kByte));
  std::memcpy(state.data_ptr<uint8_t>(), base + 8, static_cast<size_t>(n));
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>();
  gen.set_state(state);
  return gen;
}

// A result laid out like the meta kernel's (alloc_with_matching_layout in
// torch/_meta_registrations.py), so compiled graphs' stride checks hold.
at::Tensor like_query_layout(const at::Tensor& q, const at::Tensor& r) {
  if (q.sizes() == r.sizes()) {
    // The meta kernel's empty_like(query): the query's strides when it is dense. The CPU's flash
    // kernel usually returns that layout already (a copy here was 0.5% of Llama's compiled forward).
    if (r.strides() == q.strides() && q.is_non_overlapping_and_dense() && r.storage_offset() == 0) return r;
    at::Tensor out = at::empty_like(q);
    return out.copy_(r);
  }
  std::vector<int64_t> order(q.dim());
  for (int64_t i = 0; i < q.dim(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return q.stride(a) > q.stride(b); });
  std::vector<int64_t> strides(q.dim());
  int64_t stride = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    strides[*it] = stride;
    stride *= r.size(*it);
  }
  return at::empty_strided(r.sizes(), strides, r.options()).copy_(r);
}

at::Tensor like(const at::Tensor& x, const at::Tensor& r) {
  if (!r.defined() || (r.strides() == x.strides() && r.scalar_type() == x.scalar_type())) return r;
  return at::empty_like(x).copy_(r);
}

std::tuple<at::Tensor, at::Tensor> with_batch(const at::Tensor& q, at::Tensor out, at::Tensor lse) {
  if (q.dim() == 3 && lse.dim() == 2) lse = lse.unsqueeze(0);  // the meta kernel's (1, heads, seq_len)
  if (lse.scalar_type() != at::kFloat) lse = lse.to(at::kFloat);
  return {out, lse.contiguous()};
}

at::Tensor generator_state(c10::DeviceIndex device) {
  at::Generator engine = host_engine_for(std::nullopt, device);
  std::lock_guard<std::mutex> lock(engine.mutex());
  return engine.get_state();
}

bool defined(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

// A 0-dim int64 zero (philox_seed / philox_offset without dropout), allocated without a dispatch:
// at::scalar_tensor's empty and fill cost 1 us each, and every forward makes two.
at::Tensor zero_int64() {
  at::Tensor t = at::detail::empty_cpu({}, at::kLong, std::nullopt, std::nullopt, std::nullopt, std::nullopt);
  *t.data_ptr<int64_t>() = 0;
  return t;
}

// ---------------------------------------------------------------------------
// The kernels.

using ForwardResult = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt,
                                 at::Tensor, at::Tensor, at::Tensor>;

ForwardResult forward(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                      const std::optional<at::Tensor>& attn_bias, double dropout_p, bool is_causal,
                      bool return_debug_mask, std::optional<double> scale) {
  static OpCounter* counter =
      op_counter("aten::_scaled_dot_product_fused_attention_overrideable", "", ExecutionTier::kNative);
  constexpr const char* kOp = "_scaled_dot_product_fused_attention_overrideable";
  Geometry geo = check_inputs(kOp, query, key, value);
  TORCH_CHECK(dropout_p >= 0.0 && dropout_p <= 1.0, kOp, ": dropout_p must be in [0, 1], got ", dropout_p);
  const bool flash = dropout_p == 0.0 && geo.groups == 1 && query.dim() == 4 &&
                     cpu_would_use_flash(query, key, value, attn_bias, is_causal, scale,
                                         {query.requires_grad(), key.requires_grad(), value.requires_grad(),
                                          defined(attn_bias) && attn_bias->requires_grad()});
  // The CPU's flash kernel takes a mask with is_causal; its math kernel refuses the pair, with this message.
  TORCH_CHECK(flash || !(is_causal && defined(attn_bias)),
              "_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True");
  const c10::DeviceIndex device = query.device().index();
  const at::Tensor rng_state = dropout_p > 0.0 ? generator_state(device) : at::Tensor();
  // What the CPU's math decomposition saves for autograd (the softmax weights and the dropout noise)
  // goes back in cum_seq_q and cum_seq_k, which the backward receives and which are otherwise undefined
  // for dense inputs: recomputing the weights and redrawing the noise there made T5's eager training
  // step 15% slower than on CPU. Only while autograd records a graph that needs them; compiled graphs
  // (whose forward runs without grad, with the meta kernel's undefined cum_seq) recompute instead.
  const bool keep_for_backward =
      at::GradMode::is_enabled() && (query.requires_grad() || key.requires_grad() || value.requires_grad() ||
                                     (defined(attn_bias) && attn_bias->requires_grad()));
  const c10::SymInt max_q = query.sym_size(-2), max_k = key.sym_size(-2);
  auto fn = [&](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                const std::optional<at::Tensor>& bias) -> ForwardResult {
    HiddenInternals internals;
    at::Tensor out, lse, weights, noise;
    const double s = softmax_scale(q, scale);
    if (flash) {
      std::tie(out, lse) = at::_scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, is_causal, bias, scale);
    } else {
      // The CPU's math kernel step by step (its scaling, _safe_softmax, at::dropout's noise on the weights,
      // the product with value), so the numbers are the CPU's and the weights and noise are at hand.
      const at::ScalarType ct = opmath_type(q.scalar_type());
      const at::Tensor sc = scores(q, expand_heads(k, geo.groups), bias, is_causal, s, ct);
      lse = at::logsumexp(sc, -1);
      weights = at::_safe_softmax(sc, -1);
      if (dropout_p > 0.0) {
        noise = dropout_noise(host_engine_for(std::nullopt, device), weights.sizes(), dropout_p, weights.options());
      }
      out = at::matmul(noise.defined() ? weights * noise : weights, expand_heads(v, geo.groups).to(ct))
                .to(q.scalar_type());
      if (!keep_for_backward) weights = noise = at::Tensor();
    }
    std::tie(out, lse) = with_batch(q, like_query_layout(q, out), lse);
    at::Tensor seed = rng_state.defined() ? pack_generator_state(rng_state) : zero_int64();
    return {out, lse, weights, noise, max_q, max_k, seed, zero_int64(), at::Tensor()};
  };
  (void)return_debug_mask;  // the meta kernel returns no debug mask either
  return run_on_host<ForwardResult>("aten::_scaled_dot_product_fused_attention_overrideable", counter, fn, query, key,
                                    value, attn_bias);
}

using BackwardResult = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

BackwardResult backward(const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key,
                        const at::Tensor& value, const at::Tensor& attn_bias, std::array<bool, 4> grad_input_mask,
                        const at::Tensor& out, const at::Tensor& logsumexp, const at::Tensor& cum_seq_q,
                        const at::Tensor& cum_seq_k, int64_t /*max_q*/, int64_t /*max_k*/, double dropout_p,
                        bool is_causal, const at::Tensor& philox_seed, const at::Tensor& /*philox_offset*/,
                        std::optional<double> scale) {
  static OpCounter* counter =
      op_counter("aten::_scaled_dot_product_fused_attention_overrideable_backward", "", ExecutionTier::kNative);
  constexpr const char* kOp = "_scaled_dot_product_fused_attention_overrideable_backward";
  Geometry geo = check_inputs(kOp, query, key, value);
  const bool has_bias = attn_bias.defined();
  const bool bias_grad = has_bias && grad_input_mask[3];
  std::optional<at::Tensor> bias_opt;
  if (has_bias) bias_opt = attn_bias;
  // The forward's rule, so the CPU's flash backward follows the CPU's flash forward.
  if (!grad_out.defined()) return {};  // no gradient flowed into the output
  // Not for double: its logsumexp output is float32 (the meta kernel's dtype), too coarse for the CPU's
  // double flash backward; the formula recomputes the weights in double instead.
  const bool flash = dropout_p == 0.0 && geo.groups == 1 && query.dim() == 4 && !bias_grad &&
                     at::toOpMathType(query.scalar_type()) == at::kFloat &&
                     cpu_would_use_flash(query, key, value, bias_opt, is_causal, scale,
                                         {grad_input_mask[0], grad_input_mask[1], grad_input_mask[2], false});
  TORCH_CHECK(dropout_p == 0.0 || philox_seed.defined(), kOp, ": dropout needs the forward's philox_seed");
  // The forward's weights and noise when it kept them (see the forward), else recomputed and redrawn.
  const at::ScalarType ct = opmath_type(query.scalar_type());
  const bool kept = !flash && cum_seq_q.defined() && cum_seq_q.scalar_type() == ct &&
                    cum_seq_q.dim() == query.dim() && cum_seq_q.size(-2) == query.size(-2) &&
                    cum_seq_q.size(-1) == key.size(-2) &&
                    (dropout_p == 0.0 || (cum_seq_k.defined() && cum_seq_k.sizes() == cum_seq_q.sizes()));
  std::optional<at::Generator> mask_gen;
  if (!kept && dropout_p > 0.0 && dropout_p < 1.0) mask_gen = unpack_generator_state(kOp, philox_seed);
  auto fn = [&](const at::Tensor& g, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                const at::Tensor& bias, const at::Tensor& o, const at::Tensor& lse, const at::Tensor& kept_weights,
                const at::Tensor& kept_noise) -> BackwardResult {
    HiddenInternals internals;
    std::optional<at::Tensor> b;
    if (bias.defined()) b = bias;
    if (flash) {
      auto [gq, gk, gv] = at::_scaled_dot_product_flash_attention_for_cpu_backward(g, q, k, v, o, lse, 0.0, is_causal,
                                                                                   b, scale);
      return {like(q, gq), like(k, gk), like(v, gv), at::Tensor()};
    }
    // The math kernel's gradient: P = softmax(S), O = (P * D) V with D the scaled dropout mask.
    const double s = softmax_scale(q, scale);
    const at::Tensor k_full = expand_heads(k, geo.groups).to(ct), v_full = expand_heads(v, geo.groups).to(ct);
    const at::Tensor qf = q.to(ct), gf = g.to(ct);
    const at::Tensor p = kept ? kept_weights : at::_safe_softmax(scores(q, k_full, b, is_causal, s, ct), -1);
    at::Tensor d;  // the forward's noise: kept, or redrawn like the weights from the state it started from
    if (dropout_p > 0.0) {
      d = kept ? kept_noise
               : dropout_noise(mask_gen.has_value() ? *mask_gen : at::Generator(), p.sizes(), dropout_p, p.options());
    }
    const at::Tensor dropped = d.defined() ? p * d : p;
    at::Tensor gv = at::matmul(dropped.transpose(-2, -1), gf);
    at::Tensor dp = at::matmul(gf, v_full.transpose(-2, -1));
    if (d.defined()) dp = dp * d;
    const at::Tensor ds = p * (dp - (dp * p).sum(-1, /*keepdim=*/true));
    at::Tensor gq = at::matmul(ds, k_full * key_factor(s)) * query_factor(s);
    at::Tensor gk = at::matmul(ds.transpose(-2, -1), qf * query_factor(s)) * key_factor(s);
    if (geo.groups > 1) {  // each key/value head served `groups` query heads: sum their gradients
      auto fold = [&](const at::Tensor& t) { return t.unflatten(-3, {k.size(-3), geo.groups}).sum(-3); };
      gk = fold(gk);
      gv = fold(gv);
    }
    at::Tensor gb;
    if (bias_grad) gb = like(bias, ds.sum_to_size(bias.sizes()).to(bias.scalar_type()));
    return {like(q, gq.to(q.scalar_type())), like(k, gk.to(k.scalar_type())), like(v, gv.to(v.scalar_type())), gb};
  };
  return run_on_host<BackwardResult>("aten::_scaled_dot_product_fused_attention_overrideable_backward", counter, fn,
                                     grad_out, query, key, value, attn_bias, out, logsumexp,
                                     kept ? cum_seq_q : at::Tensor(), kept ? cum_seq_k : at::Tensor());
}

}  // namespace sdpa_overrideable
}  // namespace torchneuron

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torchneuron::sdpa_overrideable::sdp_choice)
}  // namespace at::native

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_scaled_dot_product_fused_attention_overrideable", TORCH_FN(torchneuron::sdpa_overrideable::forward));
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward",
         TORCH_FN(torchneuron::sdpa_overrideable::backward));
}
