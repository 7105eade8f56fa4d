// Which operators ran on the device and by which path, as TorchNeuron's
// get_executed_ops() / get_fallback_ops() report. Every device kernel opens
// an OpRecord; the per-op counters stay on, they are cheap.
#pragma once

#include <ATen/core/operator_name.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace torchneuron {

enum class ExecutionTier : uint8_t { kNative = 0, kGeneric = 1, kCompiled = 2, kNki = 3, kCustom = 4 };
const char* tier_name(ExecutionTier tier);

struct OpCount {
  std::string name;
  ExecutionTier tier;
  int64_t calls;
};

// One operator in one tier. Counters live as long as the process, so the
// hot path holds a pointer and increments without a lock or a lookup.
struct OpCounter {
  std::string name;
  ExecutionTier tier;
  std::atomic<int64_t> calls{0};
  std::atomic<bool> warned{false};
  void increment() { calls.fetch_add(1, std::memory_order_relaxed); }
};

// The counter for an operator, created on first use.
OpCounter* op_counter(const std::string& name, ExecutionTier tier);
OpCounter* op_counter(const char* name, const char* overload, ExecutionTier tier);
// For the generic path: keyed by the registered operator, warns once if asked.
void record_generic(const c10::OperatorName& op);

std::vector<OpCount> op_counts();
void clear_op_tracking();
// When on, the first generic-path run of each operator emits a warning.
void set_warn_on_generic(bool on);
bool warn_on_generic();

}  // namespace torchneuron
