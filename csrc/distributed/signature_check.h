// Cross-rank agreement check run before each collective: every rank
// contributes a small fixed-size signature (which collective, root, reduction,
// dtype, shapes) through one tiny gloo all-gather. A mismatch raises the same
// clear error on every rank instead of a transport hang, a crash or silently
// wrong data (float32 vs int32 buffers of equal size reduce without complaint).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace torchneuron::distributed {

enum class CollectiveKind : int64_t {
  kAllreduce = 1, kAllreduceCoalesced, kBroadcast, kReduce, kAllgather, kAllgatherBase, kAllgatherCoalesced,
  kAllgatherIntoTensorCoalesced, kGather, kScatter, kReduceScatter, kReduceScatterBase,
  kReduceScatterTensorCoalesced, kAlltoall, kAlltoallBase, kBarrier,
};
const char* kind_name(CollectiveKind kind);

struct Signature {
  CollectiveKind kind = CollectiveKind::kBarrier;
  int64_t root = -1;
  int64_t reduce_op = -1;
  // The tensors every rank must agree on (e.g. all_reduce's tensors, the
  // per-rank chunk of an all-gather). Empty for barrier.
  std::vector<at::Tensor> tensors;
  // all_to_all: what this rank sends to and expects from each peer, in
  // elements; checked pairwise (my send to r equals r's receive from me).
  std::vector<int64_t> send_counts, recv_counts;
};

// Throws c10::DistBackendError (the same text on every rank) when the ranks
// disagree. `transport` is the group's gloo backend.
void check_signatures(c10d::Backend& transport, const Signature& mine, int rank, int size,
                      const std::string& group);

}  // namespace torchneuron::distributed
