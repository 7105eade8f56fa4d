// Which operators ran on the device and by which path, as TorchNeuron's
// get_executed_ops() / get_fallback_ops() report. Every device kernel opens
// an OpRecord; the per-op counters stay on, they are cheap.
#pragma once

#include <ATen/core/operator_name.h>

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

class OpRecord {
 public:
  OpRecord(const c10::OperatorName& op, ExecutionTier tier);
  ~OpRecord() = default;
};

std::vector<OpCount> op_counts();
void clear_op_tracking();
// When on, the first generic-path run of each operator emits a warning.
void set_warn_on_generic(bool on);
bool warn_on_generic();

}  // namespace torchneuron
