#include "process_group_neuron.h"

#include <ATen/ops/cat.h>
#include <ATen/ops/div.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mul.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <sstream>

#include "../aten/host_view.h"
#include "../instrumentation/op_tracking.h"
#include "../runtime/device.h"
#include "../runtime/stream.h"
#include "../instrumentation/tracer.h"

namespace torchneuron::distributed {
namespace {

using c10d::OpType;
using c10d::ReduceOp;
using TensorList = std::vector<at::Tensor>;
constexpr auto kNeuron = c10::DeviceType::PrivateUse1;

// What gloo runs for our reduce op, and what we do around it.
struct ReducePlan {
  ReduceOp op;                        // passed to gloo
  std::optional<at::Tensor> premul;   // PREMUL_SUM: scale inputs first
  std::optional<double> premul_scalar;
  bool average = false;               // AVG: divide the result by the group size
};

ReducePlan plan_reduce(const ReduceOp& requested) {
  ReducePlan plan{requested};
  if (requested.op_ == ReduceOp::AVG) {
    plan.op = ReduceOp(ReduceOp::SUM);
    plan.average = true;
  } else if (requested.op_ == ReduceOp::PREMUL_SUM) {
    auto* supplement = dynamic_cast<c10d::PreMulSumSupplement*>(requested.supplement_.get());
    TORCH_CHECK(supplement, "neuron backend: PREMUL_SUM needs a factor (dist._make_nccl_premul_sum(factor))");
    if (supplement->tensor_factor.defined()) {
      plan.premul = supplement->tensor_factor;
    } else {
      plan.premul_scalar = supplement->double_factor;
    }
    plan.op = ReduceOp(ReduceOp::SUM);
  }
  return plan;
}

at::Tensor scaled(const at::Tensor& view, const ReducePlan& plan) {
  if (plan.premul) return at::mul(view, plan.premul->to(at::kCPU));
  return at::mul(view, *plan.premul_scalar);
}

void scale_in_place(const at::Tensor& view, const ReducePlan& plan) {
  if (plan.premul) {
    view.mul_(plan.premul->to(at::kCPU));
  } else {
    view.mul_(*plan.premul_scalar);
  }
}

void divide_in_place(const at::Tensor& view, int size) {
  TORCH_CHECK(view.scalar_type() != at::kBool, "neuron backend: ReduceOp.AVG is not defined for bool tensors");
  if (at::isIntegralType(view.scalar_type(), /*includeBool=*/false)) {
    view.div_(size, "trunc");
  } else {
    view.div_(size);
  }
}

// A reduce op made ready for gloo, the one preparation every reducing collective makes: the op gloo
// runs (SUM for AVG and PREMUL_SUM), PREMUL_SUM's inputs scaled first (in place where gloo reduces
// into the inputs themselves, else replaced by scaled copies), and AVG's division of `results` by
// the group size once they are in (the Work's finalize; none when `results` is empty, as on a
// reduce's non-root ranks). `each_input(f)` calls f on every input view gloo will read.
struct ReduceStage {
  ReduceOp op;
  std::function<void()> finalize;
  template <class Options>
  Options options(const Options& opts) const {
    Options o = opts;
    o.reduceOp = op;
    return o;
  }
};

template <class EachInput>
ReduceStage prepare_reduce(const ReduceOp& requested, bool in_place, EachInput&& each_input, TensorList results,
                           int size) {
  const ReducePlan plan = plan_reduce(requested);
  if (plan.premul || plan.premul_scalar) {
    each_input([&](at::Tensor& t) {
      if (in_place) {
        scale_in_place(t, plan);
      } else {
        t = scaled(t, plan);
      }
    });
  }
  ReduceStage stage{plan.op, nullptr};
  if (plan.average && !results.empty()) {
    stage.finalize = [results = std::move(results), size] {
      for (auto& v : results) divide_in_place(v, size);
    };
  }
  return stage;
}

auto each_of(TensorList& ts) {
  return [&ts](auto&& f) {
    for (auto& t : ts) f(t);
  };
}
auto each_of(std::vector<TensorList>& ls) {
  return [&ls](auto&& f) {
    for (auto& l : ls)
      for (auto& t : l) f(t);
  };
}
auto each_of(at::Tensor& t) {
  return [&t](auto&& f) { f(t); };
}

// The transport reads and writes numel() elements from data_ptr(): a strided
// view would silently exchange the wrong elements (gloo does not check), so
// refuse it, as NCCL does.
at::Tensor dense(const at::Tensor& t, const char* op) {
  TORCH_CHECK(!t.defined() || t.is_contiguous(), "neuron backend: ", op,
              " takes contiguous tensors; got one of shape ", t.sizes(), " with strides ", t.strides(),
              ". Pass t.contiguous() (and copy the result back if you need it in the original tensor).");
  return t;
}

at::Tensor host(const at::Tensor& t, const char* op, bool require_dense = true) {
  if (!t.defined()) return t;
  if (require_dense) dense(t, op);
  if (t.device().type() == kNeuron) return host_view(t);
  TORCH_CHECK(t.device().is_cpu(), "neuron backend: ", op, " takes neuron or CPU tensors, got a tensor on ",
              t.device(), ". Move it to the neuron device, or use a group whose backend serves ", t.device().type(),
              " (e.g. init_process_group(backend=\"cpu:gloo,neuron:neuron\")).");
  TORCH_CHECK(!t.is_sparse(), "neuron backend: ", op, " does not take sparse tensors");
  return t;
}

TensorList hosts(const TensorList& ts, const char* op) {
  TensorList out;
  out.reserve(ts.size());
  for (const auto& t : ts) out.push_back(host(t, op));
  return out;
}

std::vector<TensorList> hosts(const std::vector<TensorList>& ls, const char* op) {
  std::vector<TensorList> out;
  out.reserve(ls.size());
  for (const auto& l : ls) out.push_back(hosts(l, op));
  return out;
}

// gloo's *_base collectives chunk the big tensor along dim 0 and compare
// shapes; NCCL (and FSDP2, which stacks) only need matching element counts.
// Flat views of contiguous tensors accept every layout NCCL accepts.
at::Tensor flattened(const at::Tensor& t) { return t.is_contiguous() ? t.view({-1}) : t; }

TensorList flat(const std::vector<TensorList>& ls) {
  TensorList out;
  for (const auto& l : ls) out.insert(out.end(), l.begin(), l.end());
  return out;
}

// What a Work keeps alive: the host views of both sides.
TensorList joined(TensorList first, const TensorList& second) {
  first.insert(first.end(), second.begin(), second.end());
  return first;
}

// The *_tensor_coalesced collectives exchange each tensor as its flat view, as the *_base ones do.
TensorList flattened_hosts(const TensorList& ts, const char* op) {
  TensorList out = hosts(ts, op);
  for (auto& t : out) t = flattened(t);
  return out;
}

int64_t nbytes(const TensorList& ts) {
  int64_t n = 0;
  for (const auto& t : ts)
    if (t.defined()) n += static_cast<int64_t>(t.numel()) * static_cast<int64_t>(t.element_size());
  return n;
}

OpCounter* counter_for(const char* op) {
  static std::mutex mu;
  static std::unordered_map<const char*, OpCounter*> counters;
  std::lock_guard<std::mutex> lock(mu);
  auto it = counters.find(op);
  if (it == counters.end())
    it = counters.emplace(op, op_counter(std::string("c10d::") + op, ExecutionTier::kCollective)).first;
  return it->second;
}

Signature signature(CollectiveKind kind, TensorList tensors, int64_t root = -1, int64_t reduce_op = -1) {
  Signature s;
  s.kind = kind;
  s.tensors = std::move(tensors);
  s.root = root;
  s.reduce_op = reduce_op;
  return s;
}

std::vector<int64_t> split_counts(const at::Tensor& t, const std::vector<int64_t>& splits, int size) {
  const int64_t row = t.dim() > 0 && t.size(0) > 0 ? t.numel() / t.size(0) : t.numel();
  std::vector<int64_t> counts(size);
  for (int p = 0; p < size; ++p)
    counts[p] = splits.empty() ? (t.dim() > 0 ? t.size(0) / size : 0) * row : splits[p] * row;
  return counts;
}

// TorchNeuron's reduce_scatter also takes a single input holding every rank's block
// (input_list=[x]): x is split along the one dimension where its shape differs from the output's
// (the shorter shape padded with leading 1s), which must be the group size times the output's.
// Returns the per-rank blocks, shaped like the output, as gloo's list form takes them.
TensorList rank_blocks(const at::Tensor& input, const at::Tensor& output, int size) {
  std::vector<int64_t> in(input.sizes().begin(), input.sizes().end());
  std::vector<int64_t> out(output.sizes().begin(), output.sizes().end());
  while (in.size() < out.size()) in.insert(in.begin(), 1);
  while (out.size() < in.size()) out.insert(out.begin(), 1);
  std::vector<size_t> differ;
  std::ostringstream what;
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] == out[d]) continue;
    what << (differ.empty() ? "" : ", ") << "dim[" << d << "]: " << in[d] << " -> " << out[d];
    differ.push_back(d);
  }
  constexpr const char* kForm = "neuron backend: reduce_scatter of a single input tensor (input_list=[x]): ";
  TORCH_CHECK(differ.size() <= 1, kForm, "single tensor scatter can only differ in one dimension from the output, "
              "found differences in: ", what.str(), ". Pass one input per rank, or an input whose shape is the "
              "output's with one dimension multiplied by the group size (", size, ").");
  TORCH_CHECK(!differ.empty(), kForm, "when input and output shapes are identical, replica group must have size 1, "
              "got ", size, ". Pass one input per rank, or an input whose shape is the output's with one dimension "
              "multiplied by the group size.");
  const size_t d = differ[0];
  TORCH_CHECK(in[d] == out[d] * size, kForm, "scatter dimension ", d, ": input size (", in[d],
              ") must be evenly divisible by replica group size (", size, ") into the output's (", out[d],
              "); expected output size ", in[d] / size, ", or an input of size ", out[d] * size, ".");
  const at::Tensor whole = input.reshape(in);
  TensorList blocks;
  for (int r = 0; r < size; ++r) blocks.push_back(whole.narrow(d, r * out[d], out[d]).contiguous().view(output.sizes()));
  return blocks;
}

}  // namespace

ProcessGroupNeuron::ProcessGroupNeuron(c10::intrusive_ptr<c10d::Backend> transport, int rank, int size,
                                       std::string group_name, bool check_signatures)
    : c10d::Backend(rank, size),
      transport_(std::move(transport)),
      group_name_(std::move(group_name)),
      check_signatures_(check_signatures) {
  TORCH_CHECK(transport_, "neuron backend: no transport backend");
}

std::string ProcessGroupNeuron::describe(const char* op) const {
  return std::string(op) + " on rank " + std::to_string(getRank()) + " of " + std::to_string(getSize()) +
         " (group '" + group_name_ + "')";
}

template <typename Start>
c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::launch(const char* op, OpType type, const Signature* sig,
                                                          const TensorList& inputs, const TensorList& outputs,
                                                          TensorList keep, std::function<void()> finalize,
                                                          Start&& start) {
  if (sig != nullptr && check_signatures_ && getSize() > 1) {
    try {
      check_signatures(*transport_, *sig, getRank(), getSize(), group_name_);
    } catch (const c10::DistBackendError&) {
      throw;
    } catch (const c10::Error& e) {
      C10_THROW_ERROR(DistBackendError, describe_failure(describe(op), e.what_without_backtrace()));
    } catch (const std::exception& e) {
      C10_THROW_ERROR(DistBackendError, describe_failure(describe(op), e.what()));
    }
  }
  CollectiveEvent event;
  int device = -1;
  for (const TensorList* l : {&inputs, &outputs})
    for (const auto& t : *l)
      if (device < 0 && t.defined() && t.device().type() == kNeuron) device = t.device().index();
  if (device >= 0 || type == OpType::BARRIER) {
    event.counter = counter_for(op);
    event.counter->increment();
    event.timing_mode = neuron_rt::timing_mode();
  }
  if (event.timing_mode != 0) {
    event.device = device >= 0 ? device : neuron_rt::current_device();
    event.stream = neuron_rt::current_stream(event.device);
    event.correlation = neuron_rt::current_correlation();
    event.bytes_read = nbytes(inputs);
    event.bytes_written = nbytes(outputs);
    event.group_size = getSize();
    event.launch_start = neuron_rt::now_ns();
  }
  c10::intrusive_ptr<c10d::Work> inner = start();
  if (event.timing_mode != 0) event.launch_end = neuron_rt::now_ns();
  keep.insert(keep.end(), inputs.begin(), inputs.end());
  keep.insert(keep.end(), outputs.begin(), outputs.end());
  const bool p2p = type == OpType::SEND || type == OpType::RECV || type == OpType::RECVANYSOURCE;
  auto work = c10::make_intrusive<NeuronWork>(std::move(inner), outputs, std::move(keep), std::move(finalize), event,
                                              describe(op), getRank(), type, /*try_future=*/!p2p);
  if (!work->has_future()) {
    std::lock_guard<std::mutex> lock(pending_mu_);
    std::erase_if(pending_p2p_, [](const auto& w) { return w->isCompleted(); });
    pending_p2p_.push_back(work);
  }
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::broadcast(TensorList& tensors, const c10d::BroadcastOptions& opts) {
  auto sig = signature(CollectiveKind::kBroadcast, tensors, opts.rootRank);
  auto views = hosts(tensors, "broadcast");
  return launch("broadcast", OpType::BROADCAST, &sig, tensors, tensors, views, nullptr,
                [&] { return transport_->broadcast(views, opts); });
}

template <typename CollectiveOptions, typename Start>
c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::allreduce_in_place(const char* op, const char* public_name,
                                                                      OpType type, CollectiveKind kind,
                                                                      TensorList& tensors, const CollectiveOptions& opts,
                                                                      Start&& start) {
  auto sig = signature(kind, tensors, -1, opts.reduceOp.op_);
  auto views = hosts(tensors, public_name);
  const ReduceStage stage = prepare_reduce(opts.reduceOp, /*in_place=*/true, each_of(views), views, getSize());
  const auto o = stage.options(opts);
  return launch(op, type, &sig, tensors, tensors, views, stage.finalize, [&] { return start(views, o); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::allreduce(TensorList& tensors, const c10d::AllreduceOptions& opts) {
  return allreduce_in_place("allreduce", "all_reduce", OpType::ALLREDUCE, CollectiveKind::kAllreduce, tensors, opts,
                            [&](TensorList& views, const c10d::AllreduceOptions& o) {
                              return transport_->allreduce(views, o);
                            });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::allreduce_coalesced(TensorList& tensors,
                                                                       const c10d::AllreduceCoalescedOptions& opts) {
  return allreduce_in_place("allreduce_coalesced", "all_reduce_coalesced", OpType::ALLREDUCE_COALESCED,
                            CollectiveKind::kAllreduceCoalesced, tensors, opts,
                            [&](TensorList& views, const c10d::AllreduceCoalescedOptions& o) {
                              return transport_->allreduce_coalesced(views, o);
                            });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::reduce(TensorList& tensors, const c10d::ReduceOptions& opts) {
  auto sig = signature(CollectiveKind::kReduce, tensors, opts.rootRank, opts.reduceOp.op_);
  auto views = hosts(tensors, "reduce");
  // gloo's reduce uses a non-root rank's buffer as scratch; NCCL and TorchNeuron leave it as it was
  // (and so must PREMUL_SUM's scaling), so non-root ranks hand gloo a copy.
  if (getRank() != opts.rootRank) {
    for (auto& v : views) v = v.clone();
  }
  const ReduceStage stage = prepare_reduce(opts.reduceOp, /*in_place=*/true, each_of(views),
                                           getRank() == opts.rootRank ? views : TensorList{}, getSize());
  const auto o = stage.options(opts);
  return launch("reduce", OpType::REDUCE, &sig, tensors, tensors, views, stage.finalize,
                [&] { return transport_->reduce(views, o); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::allgather(std::vector<TensorList>& outputs, TensorList& inputs,
                                                             const c10d::AllgatherOptions& opts) {
  auto sig = signature(CollectiveKind::kAllgather, inputs);
  auto in = hosts(inputs, "all_gather");
  auto out = hosts(outputs, "all_gather");
  return launch("allgather", OpType::ALLGATHER, &sig, inputs, flat(outputs), joined(in, flat(out)), nullptr,
                [&] { return transport_->allgather(out, in, opts); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                   const c10d::AllgatherOptions& opts) {
  auto sig = signature(CollectiveKind::kAllgatherBase, {input});
  TORCH_CHECK(output.numel() == input.numel() * getSize(), "neuron backend: all_gather_into_tensor's output has ",
              output.numel(), " elements; it must have group size (", getSize(), ") x the input's ", input.numel());
  at::Tensor in = flattened(host(input, "all_gather_into_tensor"));
  at::Tensor out = flattened(host(output, "all_gather_into_tensor"));
  return launch("allgather_into_tensor", OpType::_ALLGATHER_BASE, &sig, {input}, {output}, {in, out}, nullptr,
                [&] { return transport_->_allgather_base(out, in, opts); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::allgather_coalesced(std::vector<TensorList>& outputs,
                                                                       TensorList& inputs,
                                                                       const c10d::AllgatherOptions& opts) {
  auto sig = signature(CollectiveKind::kAllgatherCoalesced, inputs);
  // TorchNeuron indexes the outputs [input][rank], PyTorch [rank][input]; with as many inputs as
  // ranks the two cannot be told apart, so only PyTorch's documented layout is taken, and the other
  // is named where it can be recognised.
  const bool transposed = outputs.size() == inputs.size() && outputs.size() != static_cast<size_t>(getSize()) &&
                          std::all_of(outputs.begin(), outputs.end(), [&](const TensorList& l) {
                            return l.size() == static_cast<size_t>(getSize());
                          });
  TORCH_CHECK(!transposed, "neuron backend: all_gather_coalesced takes its outputs as PyTorch documents them, one list "
              "per rank holding one tensor per input (output_tensor_lists[rank][input]: ", getSize(), " lists of ",
              inputs.size(), "); got ", outputs.size(), " lists of ", getSize(), ", TorchNeuron's [input][rank] "
              "layout, which is not taken because with as many inputs as ranks the two layouts cannot be told apart");
  TORCH_CHECK(outputs.size() == static_cast<size_t>(getSize()), "neuron backend: all_gather_coalesced needs one output "
              "list per rank (", getSize(), "), each holding one tensor per input (", inputs.size(), "); got ",
              outputs.size(), " lists");
  auto in = hosts(inputs, "all_gather_coalesced");
  auto out = hosts(outputs, "all_gather_coalesced");
  return launch("allgather_coalesced", OpType::ALLGATHER_COALESCED, &sig, inputs, flat(outputs), joined(in, flat(out)),
                nullptr,
                [&] { return transport_->allgather_coalesced(out, in, opts); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::allgather_into_tensor_coalesced(
    TensorList& outputs, TensorList& inputs, const c10d::AllgatherOptions& opts) {
  auto sig = signature(CollectiveKind::kAllgatherIntoTensorCoalesced, inputs);
  auto in = flattened_hosts(inputs, "all_gather_into_tensor_coalesced");
  auto out = flattened_hosts(outputs, "all_gather_into_tensor_coalesced");
  return launch("allgather_into_tensor_coalesced", OpType::COALESCED, &sig, inputs, outputs, joined(in, out), nullptr,
                [&] { return transport_->allgather_into_tensor_coalesced(out, in, opts); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::gather(std::vector<TensorList>& outputs, TensorList& inputs,
                                                          const c10d::GatherOptions& opts) {
  auto sig = signature(CollectiveKind::kGather, inputs, opts.rootRank);
  auto in = hosts(inputs, "gather");
  auto out = hosts(outputs, "gather");
  return launch("gather", OpType::GATHER, &sig, inputs, flat(outputs), joined(in, flat(out)), nullptr,
                [&] { return transport_->gather(out, in, opts); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::scatter(TensorList& outputs, std::vector<TensorList>& inputs,
                                                           const c10d::ScatterOptions& opts) {
  auto sig = signature(CollectiveKind::kScatter, outputs, opts.rootRank);
  auto in = hosts(inputs, "scatter");
  auto out = hosts(outputs, "scatter");
  return launch("scatter", OpType::SCATTER, &sig, flat(inputs), outputs, joined(out, flat(in)), nullptr,
                [&] { return transport_->scatter(out, in, opts); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::reduce_scatter(TensorList& outputs, std::vector<TensorList>& inputs,
                                                                  const c10d::ReduceScatterOptions& opts) {
  auto sig = signature(CollectiveKind::kReduceScatter, outputs, -1, opts.reduceOp.op_);
  std::vector<TensorList> in;
  if (outputs.size() == 1 && inputs.size() == 1 && inputs[0].size() != static_cast<size_t>(getSize())) {
    TORCH_CHECK(inputs[0].size() == 1 && inputs[0][0].defined() && outputs[0].defined(),
                "neuron backend: reduce_scatter takes one input per rank of the group (", getSize(),
                ") or a single input holding every rank's block; got ", inputs[0].size(), " inputs");
    in = {rank_blocks(host(inputs[0][0], "reduce_scatter", /*require_dense=*/false), outputs[0], getSize())};
  } else {
    in = hosts(inputs, "reduce_scatter");
  }
  auto out = hosts(outputs, "reduce_scatter");
  const ReduceStage stage = prepare_reduce(opts.reduceOp, /*in_place=*/false, each_of(in), out, getSize());
  const auto o = stage.options(opts);
  return launch("reduce_scatter", OpType::REDUCE_SCATTER, &sig, flat(inputs), outputs, joined(out, flat(in)),
                stage.finalize,
                [&] { return transport_->reduce_scatter(out, in, o); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                        const c10d::ReduceScatterOptions& opts) {
  auto sig = signature(CollectiveKind::kReduceScatterBase, {output}, -1, opts.reduceOp.op_);
  if (input.numel() != output.numel() * getSize()) {
    // TorchNeuron's wording (its lowering checks the same ratio), on the flattened tensors as NCCL reads them.
    const int64_t n = input.numel();
    std::ostringstream quotient;
    if (n % getSize() == 0) quotient << n / getSize();
    else quotient << static_cast<double>(n) / getSize();
    TORCH_CHECK(false, "neuron backend: reduce_scatter_tensor: scatter dimension 0 of the flattened tensors: input size (",
                n, ") must be evenly divisible by replica group size (", getSize(), "), but ", n, " / ", getSize(), " = ",
                quotient.str(), ". Expected output size: ", quotient.str(), ", actual output size: ", output.numel(),
                ". The input must hold group size x the output's elements.");
  }
  at::Tensor in = flattened(host(input, "reduce_scatter_tensor"));
  at::Tensor out = flattened(host(output, "reduce_scatter_tensor"));
  const ReduceStage stage = prepare_reduce(opts.reduceOp, /*in_place=*/false, each_of(in), {out}, getSize());
  const auto o = stage.options(opts);
  return launch("reduce_scatter_tensor", OpType::_REDUCE_SCATTER_BASE, &sig, {input}, {output}, {in, out},
                stage.finalize,
                [&] { return transport_->_reduce_scatter_base(out, in, o); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::reduce_scatter_tensor_coalesced(
    TensorList& outputs, TensorList& inputs, const c10d::ReduceScatterOptions& opts) {
  auto sig = signature(CollectiveKind::kReduceScatterTensorCoalesced, outputs, -1, opts.reduceOp.op_);
  auto in = flattened_hosts(inputs, "reduce_scatter_tensor_coalesced");
  auto out = flattened_hosts(outputs, "reduce_scatter_tensor_coalesced");
  const ReduceStage stage = prepare_reduce(opts.reduceOp, /*in_place=*/false, each_of(in), out, getSize());
  const auto o = stage.options(opts);
  return launch("reduce_scatter_tensor_coalesced", OpType::COALESCED, &sig, inputs, outputs, joined(in, out),
                stage.finalize,
                [&] { return transport_->reduce_scatter_tensor_coalesced(out, in, o); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                 std::vector<int64_t>& output_splits,
                                                                 std::vector<int64_t>& input_splits,
                                                                 const c10d::AllToAllOptions& opts) {
  Signature sig = signature(CollectiveKind::kAlltoallBase, {});
  sig.send_counts = split_counts(input, input_splits, getSize());
  sig.recv_counts = split_counts(output, output_splits, getSize());
  TORCH_CHECK(input.scalar_type() == output.scalar_type(), "neuron backend: all_to_all_single's input is ",
              input.scalar_type(), " but its output is ", output.scalar_type());
  sig.tensors = {input.new_empty({0}, at::TensorOptions().device(at::kCPU))};
  at::Tensor in = host(input, "all_to_all_single"), out = host(output, "all_to_all_single");
  return launch("alltoall_base", OpType::ALLTOALL_BASE, &sig, {input}, {output}, {in, out}, nullptr,
                [&] { return transport_->alltoall_base(out, in, output_splits, input_splits, opts); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::alltoall(TensorList& outputs, TensorList& inputs,
                                                            const c10d::AllToAllOptions& opts) {
  TORCH_CHECK(inputs.size() == static_cast<size_t>(getSize()) && outputs.size() == inputs.size(),
              "neuron backend: all_to_all: the number of input tensors (", inputs.size(), ") and of output tensors (",
              outputs.size(), ") must equal world size (", getSize(), "): one tensor to and from each rank");
  Signature sig = signature(CollectiveKind::kAlltoall, {});
  for (const auto& t : inputs) sig.send_counts.push_back(t.numel());
  for (const auto& t : outputs) sig.recv_counts.push_back(t.numel());
  if (!inputs.empty()) sig.tensors = {inputs[0].new_empty({0}, at::TensorOptions().device(at::kCPU))};
  auto in = hosts(inputs, "all_to_all");
  auto out = hosts(outputs, "all_to_all");
  TensorList keep = joined(in, out);
  bool uniform = !in.empty();
  for (const TensorList* l : {&in, &out})
    for (const auto& t : *l) uniform = uniform && t.sizes() == in[0].sizes();
  if (uniform) {
    return launch("alltoall", OpType::ALLTOALL, &sig, inputs, outputs, keep, nullptr,
                  [&] { return transport_->alltoall(out, in, opts); });
  }
  // gloo's list form needs one shape for all tensors; NCCL's does not. Pack
  // the pieces into flat buffers and run gloo's all_to_all_single with splits.
  TensorList flat_in;
  std::vector<int64_t> in_splits, out_splits;
  for (const auto& t : in) {
    flat_in.push_back(t.reshape({-1}));
    in_splits.push_back(t.numel());
  }
  int64_t total = 0;
  for (const auto& t : out) {
    TORCH_CHECK(t.scalar_type() == in[0].scalar_type(), "neuron backend: all_to_all mixes dtypes ",
                in[0].scalar_type(), " and ", t.scalar_type());
    out_splits.push_back(t.numel());
    total += t.numel();
  }
  at::Tensor packed_in = at::cat(flat_in);
  at::Tensor packed_out = at::empty({total}, packed_in.options());
  keep.push_back(packed_in);
  keep.push_back(packed_out);
  auto unpack = [packed_out, out, out_splits] {
    int64_t offset = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      out[i].copy_(packed_out.narrow(0, offset, out_splits[i]).view(out[i].sizes()));
      offset += out_splits[i];
    }
  };
  return launch("alltoall", OpType::ALLTOALL, &sig, inputs, outputs, keep, unpack,
                [&] { return transport_->alltoall_base(packed_out, packed_in, out_splits, in_splits, opts); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::send(TensorList& tensors, int dst, int tag) {
  auto views = hosts(tensors, "send");
  return launch("send", OpType::SEND, nullptr, tensors, {}, views, nullptr,
                [&] { return transport_->send(views, dst, tag); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::recv(TensorList& tensors, int src, int tag) {
  auto views = hosts(tensors, "recv");
  return launch("recv", OpType::RECV, nullptr, {}, tensors, views, nullptr,
                [&] { return transport_->recv(views, src, tag); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::recvAnysource(TensorList& tensors, int tag) {
  auto views = hosts(tensors, "recv");
  return launch("recv_anysource", OpType::RECVANYSOURCE, nullptr, {}, tensors, views, nullptr,
                [&] { return transport_->recvAnysource(views, tag); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::barrier(const c10d::BarrierOptions& opts) {
  auto sig = signature(CollectiveKind::kBarrier, {});
  return launch("barrier", OpType::BARRIER, &sig, {}, {}, {}, nullptr, [&] { return transport_->barrier(opts); });
}

void ProcessGroupNeuron::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  transport_->monitoredBarrier(opts, wait_all_ranks);
}

}  // namespace torchneuron::distributed
