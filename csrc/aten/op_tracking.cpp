#include "op_tracking.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

namespace torchneuron {
namespace {

// Keyed by the address of the registered operator's name, which is stable
// for the life of the registration, so the hot path builds no strings.
struct Key {
  const c10::OperatorName* op;
  ExecutionTier tier;
  bool operator==(const Key& o) const { return tier == o.tier && op == o.op; }
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    return std::hash<const void*>()(k.op) ^ (static_cast<size_t>(k.tier) << 1);
  }
};
struct Entry {
  std::string name;
  int64_t calls = 0;
  bool warned = false;
};

struct Registry {
  std::mutex mu;
  std::unordered_map<Key, Entry, KeyHash> counts;
};

Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

std::atomic<bool> g_warn{[] {
  const char* e = std::getenv("TORCHNEURON_EXT_WARN_FALLBACK");
  return e != nullptr && e[0] != '\0' && e[0] != '0';
}()};

std::string full_name(const c10::OperatorName& op) {
  return op.overload_name.empty() ? op.name : op.name + "." + op.overload_name;
}

}  // namespace

const char* tier_name(ExecutionTier tier) {
  switch (tier) {
    case ExecutionTier::kNative: return "native";
    case ExecutionTier::kGeneric: return "generic";
    case ExecutionTier::kCompiled: return "compiled";
    case ExecutionTier::kNki: return "nki";
    case ExecutionTier::kCustom: return "custom";
  }
  return "unknown";
}

OpRecord::OpRecord(const c10::OperatorName& op, ExecutionTier tier) {
  auto& r = registry();
  std::string warn_name;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    Entry& e = r.counts[Key{&op, tier}];
    if (e.calls++ == 0) e.name = full_name(op);
    if (tier == ExecutionTier::kGeneric && !e.warned && g_warn.load(std::memory_order_relaxed)) {
      e.warned = true;
      warn_name = e.name;
    }
  }
  if (!warn_name.empty()) {
    TORCH_WARN("Operator '", warn_name,
               "' has no native neuron kernel and ran on the generic path (a host kernel over zero-copy views).");
  }
}

std::vector<OpCount> op_counts() {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<OpCount> out;
  for (const auto& [k, v] : r.counts) out.push_back({v.name, k.tier, v.calls});
  return out;
}

void clear_op_tracking() {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.counts.clear();
}

void set_warn_on_generic(bool on) { g_warn.store(on); }
bool warn_on_generic() { return g_warn.load(); }

}  // namespace torchneuron
