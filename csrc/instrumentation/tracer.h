// The runtime's timing switches and trace buffer. Kernels always count
// calls; with timing on they also add up host and device time per operator;
// while a trace session is on they append one record per device activity to
// a per-thread buffer that the profiler drains. No PyTorch types.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace neuron_rt {

enum TimingBits : uint32_t { kTimingAggregate = 1, kTimingTrace = 2 };

// One relaxed load on the hot path: 0 when everything is off.
inline std::atomic<uint32_t>& timing_flags() {
  static std::atomic<uint32_t> flags{0};
  return flags;
}
inline uint32_t timing_mode() { return timing_flags().load(std::memory_order_relaxed); }
void set_timing_bit(uint32_t bit, bool on);

enum class TraceKind : uint8_t { kKernel = 0, kMemcpy = 1, kMemset = 2, kRuntime = 3, kMemory = 4 };
enum class CopyKind : uint8_t { kNone = 0, kHostToDevice = 1, kDeviceToHost = 2, kDeviceToDevice = 3 };

struct TraceRecord {
  TraceKind kind = TraceKind::kKernel;
  uint8_t tier = 0;
  CopyKind copy = CopyKind::kNone;
  int8_t dtype = -1;  // c10::ScalarType of the first tensor argument, -1 unknown (for the cost model)
  int16_t device = 0;
  int16_t dst_device = -1;
  int32_t group_size = 0;  // collectives: ranks in the process group (the cost model's N)
  int64_t stream = 0;
  uint64_t correlation = 0;
  int64_t host_start = 0, kernel_start = 0, kernel_end = 0, host_end = 0;  // ns, steady clock
  uint64_t bytes_read = 0, bytes_written = 0, flops = 0;
  uint64_t elements = 0;  // the largest tensor's element count: what Vector/Scalar engines would stream
  uint64_t model_ns = 0;
  // Ran inside a compiled region (one launch of a compiled graph): a named child of the
  // region's kernel, whose time the region's own record already holds.
  bool nested = false;  // a projection made where the kernel ran (NKI's instruction-level estimate), 0: none
  int64_t allocated = 0, reserved = 0;  // kMemory: HBM in use after the event
  const char* name = "";  // static storage: operator names live as long as the process
  uint64_t thread = 0;
};

void record(const TraceRecord& r);
// Moves out every thread's records (in time order per thread).
std::vector<TraceRecord> drain_records();
void clear_records();
// Threads alive that have recorded (a thread's buffer is dropped, its records
// kept for the next drain, when it exits).
size_t registered_thread_buffers();

// Kineto's correlation ids for the ops being dispatched on this thread.
void push_correlation(uint64_t id);
void pop_correlation();
uint64_t current_correlation();

uint64_t thread_id();

// Compiled regions open on this thread. A compiled graph is one device launch
// (one NEFF execution on Trainium); the kernels it runs are its children, so
// they are recorded as nested instead of as device time of their own.
// The region also sums what its children moved and computed, which its own
// record (and the cost model's projection of it) then carries.
struct RegionState {
  int depth = 0;
  uint64_t bytes_read = 0, bytes_written = 0, flops = 0, elements = 0;
  int8_t dtype = -1;  // the first child's that has one (the cost model's rate for the region's FLOPs)
  void add_child(uint64_t read, uint64_t written, uint64_t fl, uint64_t elems, int8_t dt) {
    bytes_read += read;
    bytes_written += written;
    flops += fl;
    if (elems > elements) elements = elems;
    if (dtype < 0) dtype = dt;
  }
};
inline RegionState& region() {
  thread_local RegionState state;
  return state;
}
inline int region_depth() { return region().depth; }

}  // namespace neuron_rt
