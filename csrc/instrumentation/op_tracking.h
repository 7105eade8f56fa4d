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

// The tiers: the enum and kTierNames are the one definition (same order);
// everything sized or looked up by tier derives from kNumTiers.
enum class ExecutionTier : uint8_t { kNative = 0, kGeneric = 1, kCompiled = 2, kNki = 3, kCustom = 4,
                                     kCollective = 5, kCount };
constexpr size_t kNumTiers = static_cast<size_t>(ExecutionTier::kCount);
inline constexpr const char* kTierNames[kNumTiers] = {"native", "generic", "compiled", "nki", "custom", "collective"};
const char* tier_name(ExecutionTier tier);
// The tier called `name`, or false.
bool tier_from_name(const std::string& name, ExecutionTier* tier);

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
  // Filled only while timing is on (calls_timed <= calls).
  std::atomic<int64_t> calls_timed{0};
  std::atomic<int64_t> host_ns{0};    // dispatch entry to exit
  std::atomic<int64_t> device_ns{0};  // the kernel's execution
  std::atomic<int64_t> bytes_read{0};
  std::atomic<int64_t> bytes_written{0};
  std::atomic<int64_t> flops{0};
  std::atomic<int64_t> elements{0};
  std::atomic<int8_t> dtype{-1};  // the last timed call's (c10::ScalarType), for the cost model
  // Copies (aten::_copy_from): the timed calls that crossed between host and device and their bytes,
  // the rest being device to device (the cost model's PCIe against HBM).
  std::atomic<int64_t> host_transfer_calls{0};
  std::atomic<int64_t> host_transfer_read{0};
  std::atomic<int64_t> host_transfer_written{0};
  // Set on the twin that holds this operator's calls inside compiled regions.
  bool nested = false;
  std::atomic<OpCounter*> nested_twin{nullptr};
  void increment() { calls.fetch_add(1, std::memory_order_relaxed); }
  void add_timing(int64_t host, int64_t device, int64_t read, int64_t written, int64_t fl, int64_t elems = 0,
                  int8_t dt = -1) {
    calls_timed.fetch_add(1, std::memory_order_relaxed);
    host_ns.fetch_add(host, std::memory_order_relaxed);
    device_ns.fetch_add(device, std::memory_order_relaxed);
    bytes_read.fetch_add(read, std::memory_order_relaxed);
    bytes_written.fetch_add(written, std::memory_order_relaxed);
    flops.fetch_add(fl, std::memory_order_relaxed);
    if (elems) elements.fetch_add(elems, std::memory_order_relaxed);
    if (dt >= 0) dtype.store(dt, std::memory_order_relaxed);
  }
};

struct OpTiming {
  std::string name;
  ExecutionTier tier;
  int64_t calls, calls_timed, host_ns, device_ns, bytes_read, bytes_written, flops, elements;
  int dtype;
  bool nested;  // calls inside compiled regions (children of a compiled graph's launch)
  int64_t host_transfer_calls, host_transfer_read, host_transfer_written;  // copies: host <-> device part
};
std::vector<OpTiming> op_timings();
void reset_op_timings();

// The counter for an operator, created on first use.
OpCounter* op_counter(const std::string& name, ExecutionTier tier);
OpCounter* op_counter(const char* name, const char* overload, ExecutionTier tier);
// Where the timing of a call goes: `c` itself, or, inside a compiled region,
// its twin (the same name and tier, flagged nested), so per-op totals do not
// count a region's time twice. Counts of calls stay on `c`.
OpCounter* timing_counter(OpCounter* c);
// For the generic path: keyed by the registered operator, warns once if asked.
OpCounter* record_generic(const c10::OperatorName& op);

std::vector<OpCount> op_counts();
void clear_op_tracking();
// When on, the first generic-path run of each operator emits a warning.
void set_warn_on_generic(bool on);
bool warn_on_generic();

}  // namespace torchneuron
