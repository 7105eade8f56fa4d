#pragma once

#include <cstdint>
#include <vector>

namespace torchneuron {

// HBM in use on a core after an allocation or free, during the last
// torch.profiler session (timestamps in the profiler's clock, ns). Empty in a
// build without Kineto (no -DUSE_KINETO), which has no such session.
struct MemorySample {
  int device;
  int64_t time_ns;
  int64_t allocated;
  int64_t reserved;
};
std::vector<MemorySample> last_memory_timeline();

}  // namespace torchneuron
