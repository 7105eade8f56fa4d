// Streams and events of the simulated runtime. Kernels execute synchronously
// on the calling thread, so work enqueued on any stream has completed when the
// call that enqueued it returns; streams and events still keep the semantics
// of a real stream API (identity, priority, per-thread current stream,
// recorded/unrecorded events, timing).
#pragma once

#include <cstdint>
#include <mutex>

namespace neuron_rt {

// Stream ids: 0 is the default stream of a core; pool streams follow, 32 per
// priority level, handed out round-robin as CUDA does.
constexpr int kStreamsPerPriority = 32;
constexpr int kPriorityLevels = 2;  // 0 (normal) and -1 (high)

struct StreamId {
  static int64_t make(int priority_level, int index) { return 1 + priority_level * kStreamsPerPriority + index; }
  static int priority(int64_t id) { return id == 0 ? 0 : -static_cast<int>((id - 1) / kStreamsPerPriority); }
  static bool valid(int64_t id) { return id >= 0 && id <= kPriorityLevels * kStreamsPerPriority; }
};

// A new stream id from the pool of `device` for the given priority (0 or
// negative for higher priority, clamped to the supported range).
int64_t stream_from_pool(int device, int priority);

int64_t current_stream(int device) noexcept;
void set_current_stream(int device, int64_t stream) noexcept;

struct Event {
  int device = -1;
  bool enable_timing = false;
  bool recorded = false;
  int64_t stream = 0;
  int64_t time_ns = 0;
  uint64_t record_count = 0;
};

void event_record(Event* e, int device, int64_t stream);
// Milliseconds between two recorded, timing-enabled events.
double event_elapsed_ms(const Event* start, const Event* end);

}  // namespace neuron_rt
