#include "stream.h"

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

#include "device.h"

namespace neuron_rt {
namespace {

std::atomic<uint32_t> g_next_stream[kMaxCores][kPriorityLevels];
thread_local int64_t tls_current_stream[kMaxCores] = {};

}  // namespace

int64_t stream_from_pool(int device, int priority) {
  check_device_index(device);
  const int level = std::clamp(-priority, 0, kPriorityLevels - 1);
  const uint32_t index = g_next_stream[device][level].fetch_add(1) % kStreamsPerPriority;
  return StreamId::make(level, static_cast<int>(index));
}

int64_t current_stream(int device) noexcept {
  return device >= 0 && device < kMaxCores ? tls_current_stream[device] : 0;
}

void set_current_stream(int device, int64_t stream) noexcept {
  if (device >= 0 && device < kMaxCores) tls_current_stream[device] = stream;
}

void event_record(Event* e, int device, int64_t stream) {
  if (e->device >= 0 && e->device != device) {
    throw std::invalid_argument("Event was created on neuron:" + std::to_string(e->device) +
                                " but is recorded on a stream of neuron:" + std::to_string(device) + ".");
  }
  e->device = device;
  e->stream = stream;
  // All work enqueued before the record has already run (synchronous
  // execution), so the event completes at the moment it is recorded.
  e->time_ns = now_ns();
  e->recorded = true;
  e->record_count++;
}

double event_elapsed_ms(const Event* start, const Event* end) {
  if (start == nullptr || end == nullptr || !start->recorded || !end->recorded) {
    throw std::invalid_argument("Both events must be recorded before calculating elapsed time.");
  }
  if (!start->enable_timing || !end->enable_timing) {
    throw std::invalid_argument("Both events must be created with argument 'enable_timing=True'.");
  }
  return static_cast<double>(end->time_ns - start->time_ns) / 1e6;
}

}  // namespace neuron_rt
