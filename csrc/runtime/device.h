// The simulated Neuron runtime: which logical NeuronCores exist and which one
// each host thread is using. No PyTorch types here, so this layer can be read
// (and tested) as a runtime of its own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace neuron_rt {

// The most logical cores a process can see (c10::DeviceIndex is an int8_t; kept well inside it).
// Per-core tables elsewhere (stream counters, the allocator's per-core deleters) are sized by it.
inline constexpr int kMaxCores = 64;

// What touching the device in a forked child raises (memory.cpp, _C._init, torch.neuron's lazy
// init; the Python side adds how to switch to spawn). No trailing period, so callers can extend it.
inline constexpr const char* kBadForkMessage =
    "Cannot re-initialize neuron in forked subprocess. To use the neuron device with multiprocessing, you must "
    "use the 'spawn' start method";

// Result of parsing NEURON_RT_VISIBLE_CORES / NEURON_RT_NUM_CORES once per
// process. A bad value is remembered, not thrown from a noexcept path: the
// device count becomes 0 and `config_error()` says what was wrong.
struct CoreConfig {
  std::vector<int> physical_ids;  // logical index -> physical core id
  std::string error;              // non-empty when the environment was invalid
  std::string source;             // which variable decided the count
};

const CoreConfig& core_config();

// Reads NEURON_RT_VISIBLE_CORES / NEURON_RT_NUM_CORES again: a distributed job sets the rank's core
// after import (as TorchNeuron's process-group setup does). Throws std::logic_error once the
// runtime has started, because tensors then already live on the old cores.
void reload_core_config();

// The cores this process can use are the indices [first_device(), end_device()): neuron:0.. on one
// host, and neuron:LOCAL_RANK alone in a distributed job, where PyTorch's device_count() is the
// node's process count (TorchNeuron's numbering). Per-core tables are indexed by device index, so
// loops over them run over this range, never over 0..device_count(). None of these throw.
int device_count() noexcept;
int attached_count() noexcept;  // visible cores (0 when the configuration is invalid)
int first_device() noexcept;
int end_device() noexcept;
bool is_attached(int index) noexcept;
int local_world_size() noexcept;  // -1 outside a distributed job

// Numbers this process's cores from `start` in a node of `local_world_size` processes. Throws
// std::invalid_argument for an impossible layout, std::logic_error when the runtime has started
// with another numbering.
void set_local_layout(int start, int local_world_size);

// Called by set_local_layout when it moves this process's cores to new indices (only before the
// runtime starts): per-core state set so far (a seed, a capacity) follows the core. Register at
// static initialisation.
using RenumberObserver = void (*)(int old_first, int new_first, int count);
void add_renumber_observer(RenumberObserver observer);

// The physical core behind a device index (checked).
int physical_core_id(int index);

// Throws std::out_of_range (std::invalid_argument for a bad configuration) naming the valid range
// when `index` is not one of this process's cores.
void check_device_index(int index);

// The calling thread's current core (default: first_device()).
int current_device() noexcept;
void set_device(int index);
int exchange_device(int index);

// Makes `device` the calling thread's current core for a scope (a negative index keeps the current
// one) and restores the previous core on exit. Throws as set_device does for a core that is not
// visible. Cheaper than a full c10::DeviceGuard on the hot path; the backend's CurrentDeviceScope
// (backend/errors.h) is this one with runtime errors raised as PyTorch's.
class CurrentDeviceScope {
 public:
  explicit CurrentDeviceScope(int device);
  ~CurrentDeviceScope();
  CurrentDeviceScope(const CurrentDeviceScope&) = delete;
  CurrentDeviceScope& operator=(const CurrentDeviceScope&) = delete;

 private:
  int previous_;
};

// Parse a core list such as "0-3" or "1,3" (exposed for tests and messages).
std::vector<int> parse_core_list(const std::string& text, std::string* error);

// Fork safety: set in a forked child when the parent had initialised the
// runtime. Touching the device there is an error.
bool in_bad_fork() noexcept;
void mark_initialized() noexcept;
bool is_initialized() noexcept;

// Monotonic clock shared by events, timing and traces (nanoseconds).
int64_t now_ns() noexcept;

}  // namespace neuron_rt
