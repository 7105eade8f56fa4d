#include "op_tracking.h"

#include <c10/util/Exception.h>

#include "tracer.h"

#include <deque>
#include <mutex>
#include <unordered_map>

namespace torchneuron {
namespace {

struct Registry {
  std::mutex mu;
  std::deque<OpCounter> counters;  // stable addresses
  std::unordered_map<std::string, OpCounter*> by_name[kNumTiers];
  // The generic path is keyed by the registered operator's name object,
  // whose address is stable for the life of the registration.
  std::unordered_map<const c10::OperatorName*, OpCounter*> by_op;
};

Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

// Set from TORCHNEURON_EXT_WARN_FALLBACK when the module loads (Module.cpp: the environment's grammar is the
// backend's, a layer above this one).
std::atomic<bool> g_warn{false};

OpCounter* counter_locked(Registry& r, const std::string& name, ExecutionTier tier) {
  TORCH_INTERNAL_ASSERT(static_cast<size_t>(tier) < kNumTiers, "op_counter: tier ", static_cast<int>(tier),
                        " is not one of the ", kNumTiers, " tiers");
  auto& map = r.by_name[static_cast<size_t>(tier)];
  auto it = map.find(name);
  if (it != map.end()) return it->second;
  OpCounter& c = r.counters.emplace_back();
  c.name = name;
  c.tier = tier;
  map.emplace(name, &c);
  return &c;
}

void reset_timing_fields(OpCounter& c) {
  for (auto* f : {&c.calls_timed, &c.host_ns, &c.device_ns, &c.bytes_read, &c.bytes_written, &c.flops, &c.elements,
                  &c.host_transfer_calls, &c.host_transfer_read, &c.host_transfer_written})
    f->store(0);
}

}  // namespace

const char* tier_name(ExecutionTier tier) {
  const auto i = static_cast<size_t>(tier);
  return i < kNumTiers ? kTierNames[i] : "unknown";
}

bool tier_from_name(const std::string& name, ExecutionTier* tier) {
  for (size_t i = 0; i < kNumTiers; ++i) {
    if (name == kTierNames[i]) {
      *tier = static_cast<ExecutionTier>(i);
      return true;
    }
  }
  return false;
}

OpCounter* op_counter(const std::string& name, ExecutionTier tier) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return counter_locked(r, name, tier);
}

OpCounter* op_counter(const char* name, const char* overload, ExecutionTier tier) {
  std::string full(name);
  if (overload != nullptr && overload[0] != '\0') full = full + "." + overload;
  return op_counter(full, tier);
}

OpCounter* timing_counter(OpCounter* c) {
  if (C10_LIKELY(neuron_rt::region_depth() == 0)) return c;
  OpCounter* twin = c->nested_twin.load(std::memory_order_acquire);
  if (twin != nullptr) return twin;
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  twin = c->nested_twin.load(std::memory_order_relaxed);
  if (twin == nullptr) {
    // Kept out of by_name: lookups by name and op_counts() see only `c`.
    twin = &r.counters.emplace_back();
    twin->name = c->name;
    twin->tier = c->tier;
    twin->nested = true;
    c->nested_twin.store(twin, std::memory_order_release);
  }
  return twin;
}

OpCounter* record_generic(const c10::OperatorName& op) {
  auto& r = registry();
  OpCounter* c;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.by_op.find(&op);
    if (it == r.by_op.end()) {
      const std::string full = op.overload_name.empty() ? op.name : op.name + "." + op.overload_name;
      it = r.by_op.emplace(&op, counter_locked(r, full, ExecutionTier::kGeneric)).first;
    }
    c = it->second;
  }
  c->increment();
  if (g_warn.load(std::memory_order_relaxed) && !c->warned.exchange(true)) {
    TORCH_WARN("Operator '", c->name,
               "' has no native neuron kernel and ran on the generic path (a host kernel over zero-copy views).");
  }
  return c;
}

std::vector<OpTiming> op_timings() {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<OpTiming> out;
  for (const auto& c : r.counters) {
    // A twin counts only timed calls (its operator's counter has them all).
    const int64_t n = c.nested ? c.calls_timed.load(std::memory_order_relaxed) : c.calls.load(std::memory_order_relaxed);
    if (n == 0) continue;
    out.push_back({c.name, c.tier, n, c.calls_timed.load(), c.host_ns.load(), c.device_ns.load(), c.bytes_read.load(),
                   c.bytes_written.load(), c.flops.load(), c.elements.load(), c.dtype.load(), c.nested,
                   c.host_transfer_calls.load(), c.host_transfer_read.load(), c.host_transfer_written.load()});
  }
  return out;
}

void reset_op_timings() {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (auto& c : r.counters) reset_timing_fields(c);
}

std::vector<OpCount> op_counts() {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<OpCount> out;
  for (const auto& c : r.counters) {
    const int64_t n = c.calls.load(std::memory_order_relaxed);
    if (n > 0 && !c.nested) out.push_back({c.name, c.tier, n});
  }
  return out;
}

void clear_op_tracking() {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (auto& c : r.counters) {
    c.calls.store(0);
    c.warned.store(false);
    reset_timing_fields(c);
  }
}

void set_warn_on_generic(bool on) { g_warn.store(on); }
bool warn_on_generic() { return g_warn.load(); }

}  // namespace torchneuron
