#include "signature_check.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>
#include <c10/core/ScalarType.h>
#include <c10/util/hash.h>

#include <sstream>

namespace torchneuron::distributed {

const char* kind_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllreduce: return "all_reduce";
    case CollectiveKind::kAllreduceCoalesced: return "all_reduce_coalesced";
    case CollectiveKind::kBroadcast: return "broadcast";
    case CollectiveKind::kReduce: return "reduce";
    case CollectiveKind::kAllgather: return "all_gather";
    case CollectiveKind::kAllgatherBase: return "all_gather_into_tensor";
    case CollectiveKind::kAllgatherCoalesced: return "all_gather_coalesced";
    case CollectiveKind::kAllgatherIntoTensorCoalesced: return "all_gather_into_tensor_coalesced";
    case CollectiveKind::kGather: return "gather";
    case CollectiveKind::kScatter: return "scatter";
    case CollectiveKind::kReduceScatter: return "reduce_scatter";
    case CollectiveKind::kReduceScatterBase: return "reduce_scatter_tensor";
    case CollectiveKind::kReduceScatterTensorCoalesced: return "reduce_scatter_tensor_coalesced";
    case CollectiveKind::kAlltoall: return "all_to_all";
    case CollectiveKind::kAlltoallBase: return "all_to_all_single";
    case CollectiveKind::kBarrier: return "barrier";
  }
  return "unknown collective";
}

namespace {

// Layout of one rank's row: a header every rank must share, then the
// all-to-all counts (one per peer, each way).
constexpr int kMaxDims = 6;
enum Field : int {
  kKind, kRoot, kReduceOp, kDtype, kCount, kNdim, kDim0, kHash = kDim0 + kMaxDims, kHeader
};

const char* reduce_name(int64_t op) {
  static const char* names[] = {"sum", "avg", "product", "min", "max", "band", "bor", "bxor", "premul_sum"};
  return op >= 0 && op < 9 ? names[op] : nullptr;
}

std::string describe(const int64_t* row) {
  std::ostringstream s;
  s << kind_name(static_cast<CollectiveKind>(row[kKind]));
  std::vector<std::string> args;
  if (const char* r = reduce_name(row[kReduceOp])) args.push_back(r);
  if (row[kRoot] >= 0) args.push_back("root=" + std::to_string(row[kRoot]));
  if (!args.empty()) {
    s << "(";
    for (size_t i = 0; i < args.size(); ++i) s << (i ? ", " : "") << args[i];
    s << ")";
  }
  const auto kind = static_cast<CollectiveKind>(row[kKind]);
  if (row[kCount] > 0 && (kind == CollectiveKind::kAlltoall || kind == CollectiveKind::kAlltoallBase)) {
    // Shapes legitimately differ per rank here; only the dtype must agree.
    s << " " << c10::getDtypeNames(static_cast<c10::ScalarType>(row[kDtype])).first;
  } else if (row[kCount] > 0) {
    s << " " << c10::getDtypeNames(static_cast<c10::ScalarType>(row[kDtype])).first << "[";
    const int64_t ndim = row[kNdim];
    for (int64_t d = 0; d < std::min<int64_t>(ndim, kMaxDims); ++d) s << (d ? ", " : "") << row[kDim0 + d];
    if (ndim > kMaxDims) s << ", ...";
    s << "]";
    if (row[kCount] > 1) s << " and " << row[kCount] - 1 << " more tensor" << (row[kCount] > 2 ? "s" : "");
  }
  return s.str();
}

}  // namespace

void check_signatures(c10d::Backend& transport, const Signature& mine, int rank, int size,
                      const std::string& group) {
  const int64_t width = kHeader + 2 * size;
  at::Tensor row = at::zeros({width}, at::kLong);
  int64_t* r = row.data_ptr<int64_t>();
  r[kKind] = static_cast<int64_t>(mine.kind);
  r[kRoot] = mine.root;
  r[kReduceOp] = mine.reduce_op;
  r[kDtype] = -1;
  r[kCount] = static_cast<int64_t>(mine.tensors.size());
  uint64_t hash = 0;
  for (size_t i = 0; i < mine.tensors.size(); ++i) {
    const at::Tensor& t = mine.tensors[i];
    if (i == 0) {
      r[kDtype] = static_cast<int64_t>(t.scalar_type());
      r[kNdim] = t.dim();
      for (int64_t d = 0; d < std::min<int64_t>(t.dim(), kMaxDims); ++d) r[kDim0 + d] = t.size(d);
    }
    hash = c10::hash_combine(hash, static_cast<uint64_t>(t.scalar_type()));
    for (int64_t s : t.sizes()) hash = c10::hash_combine(hash, static_cast<uint64_t>(s));
    hash = c10::hash_combine(hash, 0x9e3779b97f4a7c15ULL);
  }
  r[kHash] = static_cast<int64_t>(hash);
  for (size_t p = 0; p < mine.send_counts.size() && static_cast<int>(p) < size; ++p) {
    r[kHeader + p] = mine.send_counts[p];
    r[kHeader + size + p] = mine.recv_counts[p];
  }

  at::Tensor all = at::empty({size * width}, at::kLong);
  c10d::AllgatherOptions opts;
  transport._allgather_base(all, row, opts)->wait();
  const int64_t* rows = all.data_ptr<int64_t>();

  bool same = true;
  for (int p = 0; p < size && same; ++p)
    for (int f = 0; f < kHeader && same; ++f) same = rows[p * width + f] == r[f];
  if (!same) {
    std::ostringstream msg;
    msg << "neuron backend: the ranks of group '" << group << "' called mismatched collectives:";
    for (int p = 0; p < size; ++p) msg << "\n  rank " << p << ": " << describe(rows + p * width);
    msg << "\nEvery rank must call the same collective, in the same order, with tensors of the same "
           "dtype and shape (for all_gather / reduce_scatter: the same per-rank chunk).";
    C10_THROW_ERROR(DistBackendError, msg.str());
  }
  if (mine.kind == CollectiveKind::kAlltoall || mine.kind == CollectiveKind::kAlltoallBase) {
    // My send to peer p must be what p expects from me, on every pair.
    std::ostringstream msg;
    bool ok = true;
    for (int a = 0; a < size; ++a) {
      for (int b = 0; b < size; ++b) {
        const int64_t sent = rows[a * width + kHeader + b];
        const int64_t expected = rows[b * width + kHeader + size + a];
        if (sent != expected) {
          if (ok) msg << "neuron backend: " << kind_name(mine.kind) << " split sizes disagree across ranks of group '"
                      << group << "':";
          ok = false;
          msg << "\n  rank " << a << " sends " << sent << " elements to rank " << b << ", which expects " << expected;
        }
      }
    }
    if (!ok) {
      msg << "\nrank i's input_split_sizes[j] must equal rank j's output_split_sizes[i] (in rows of dim 0).";
      C10_THROW_ERROR(DistBackendError, msg.str());
    }
  }
}

}  // namespace torchneuron::distributed
