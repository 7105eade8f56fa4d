#include "device.h"

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <set>
#include <stdexcept>

namespace neuron_rt {
namespace {

constexpr int kDefaultCores = 2;
constexpr int kMaxPhysicalId = 1023;

bool parse_int(const std::string& s, long* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  long v = std::strtol(s.c_str(), &end, 10);
  if (end == nullptr || *end != '\0') return false;
  *out = v;
  return true;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  size_t e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

CoreConfig load_config() {
  CoreConfig cfg;
  const char* visible = std::getenv("NEURON_RT_VISIBLE_CORES");
  const char* num = std::getenv("NEURON_RT_NUM_CORES");
  if (visible != nullptr && *visible != '\0') {
    cfg.source = "NEURON_RT_VISIBLE_CORES";
    std::string err;
    cfg.physical_ids = parse_core_list(visible, &err);
    if (!err.empty()) {
      cfg.error = "NEURON_RT_VISIBLE_CORES='" + std::string(visible) + "' is invalid: " + err +
          ". Use a comma-separated list of core ids or ranges, e.g. \"0-3\" or \"1,3\".";
      cfg.physical_ids.clear();
    }
    return cfg;
  }
  if (num != nullptr && *num != '\0') {
    cfg.source = "NEURON_RT_NUM_CORES";
    long n = 0;
    if (!parse_int(trim(num), &n) || n < 1 || n > kMaxCores) {
      cfg.error = "NEURON_RT_NUM_CORES='" + std::string(num) +
          "' is invalid: expected a whole number from 1 to " + std::to_string(kMaxCores) + ".";
      return cfg;
    }
    for (int i = 0; i < n; ++i) cfg.physical_ids.push_back(i);
    return cfg;
  }
  cfg.source = "default";
  for (int i = 0; i < kDefaultCores; ++i) cfg.physical_ids.push_back(i);
  return cfg;
}

// -1: this thread has not chosen a core and uses the process's first one (neuron:LOCAL_RANK in a
// distributed job), so autograd and other worker threads start on the core the process owns.
thread_local int tls_current_device = -1;
std::atomic<bool> g_initialized{false};

// The process's view of the node in a distributed job (set_local_layout); -1 outside one.
std::atomic<int> g_first_device{0};
std::atomic<int> g_local_world_size{-1};

std::vector<RenumberObserver>& renumber_observers() {
  static std::vector<RenumberObserver> observers;
  return observers;
}

std::mutex g_config_mutex;
// Replaced (never freed) by reload_core_config, so references handed out earlier stay valid.
std::atomic<const CoreConfig*> g_config{nullptr};
std::atomic<bool> g_bad_fork{false};

void on_fork_child() {
  if (g_initialized.load()) g_bad_fork.store(true);
}

struct ForkHandlerInstaller {
  ForkHandlerInstaller() { pthread_atfork(nullptr, nullptr, &on_fork_child); }
} fork_handler_installer;

}  // namespace

std::vector<int> parse_core_list(const std::string& text, std::string* error) {
  std::vector<int> ids;
  std::set<int> seen;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item = trim(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (item.empty()) {
      *error = "empty entry";
      return {};
    }
    long lo = 0, hi = 0;
    size_t dash = item.find('-', 1);
    bool ok = dash == std::string::npos
        ? parse_int(item, &lo) && (hi = lo, true)
        : parse_int(trim(item.substr(0, dash)), &lo) && parse_int(trim(item.substr(dash + 1)), &hi);
    if (!ok || lo < 0 || hi < lo || hi > kMaxPhysicalId) {
      *error = "'" + item + "' is not a core id or an ascending range of ids from 0 to " +
          std::to_string(kMaxPhysicalId);
      return {};
    }
    for (long i = lo; i <= hi; ++i) {
      if (!seen.insert(static_cast<int>(i)).second) {
        *error = "core " + std::to_string(i) + " is listed twice";
        return {};
      }
      ids.push_back(static_cast<int>(i));
    }
    if (static_cast<int>(ids.size()) > kMaxCores) {
      *error = "more than " + std::to_string(kMaxCores) + " cores";
      return {};
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return ids;
}

const CoreConfig& core_config() {
  const CoreConfig* cfg = g_config.load(std::memory_order_acquire);
  if (cfg != nullptr) return *cfg;
  std::lock_guard<std::mutex> lock(g_config_mutex);
  cfg = g_config.load(std::memory_order_relaxed);
  if (cfg == nullptr) {
    cfg = new CoreConfig(load_config());
    g_config.store(cfg, std::memory_order_release);
  }
  return *cfg;
}

void reload_core_config() {
  if (is_initialized()) {
    throw std::logic_error(
        "the neuron runtime has started, so its NeuronCores can no longer change; set NEURON_RT_VISIBLE_CORES "
        "before the first neuron tensor or device call");
  }
  std::lock_guard<std::mutex> lock(g_config_mutex);
  g_config.store(new CoreConfig(load_config()), std::memory_order_release);
}

int attached_count() noexcept { return static_cast<int>(core_config().physical_ids.size()); }

int first_device() noexcept { return g_first_device.load(std::memory_order_relaxed); }

int end_device() noexcept { return first_device() + attached_count(); }

int device_count() noexcept {
  const int local_world = g_local_world_size.load(std::memory_order_relaxed);
  return local_world >= 0 ? local_world : attached_count();
}

bool is_attached(int index) noexcept { return index >= first_device() && index < end_device(); }

int physical_core_id(int index) {
  check_device_index(index);
  return core_config().physical_ids[index - first_device()];
}

void set_local_layout(int start, int local_world_size) {
  if (local_world_size < 1 || local_world_size > kMaxCores) {
    throw std::invalid_argument("local world size " + std::to_string(local_world_size) + " is out of range: 1 to " +
                                std::to_string(kMaxCores) + " processes per node");
  }
  if (start < 0 || start + attached_count() > local_world_size) {
    throw std::invalid_argument("local device start index " + std::to_string(start) +
                                " is out of range. Valid range is 0 to " +
                                std::to_string(local_world_size - attached_count()));
  }
  if (is_initialized() && start != first_device()) {
    throw std::logic_error("the neuron runtime has started with its cores numbered from neuron:" +
                           std::to_string(first_device()) + ", so they cannot be renumbered from neuron:" +
                           std::to_string(start));
  }
  const int old_first = first_device();
  if (start != old_first) {
    for (RenumberObserver observer : renumber_observers()) observer(old_first, start, attached_count());
  }
  g_first_device.store(start, std::memory_order_relaxed);
  g_local_world_size.store(local_world_size, std::memory_order_relaxed);
  // As TorchNeuron: the calling thread's explicit choice pointed at the old numbering.
  tls_current_device = -1;
}

int local_world_size() noexcept { return g_local_world_size.load(std::memory_order_relaxed); }

void add_renumber_observer(RenumberObserver observer) { renumber_observers().push_back(observer); }

void check_device_index(int index) {
  const int n = attached_count();
  if (n == 0 && !core_config().error.empty()) throw std::invalid_argument(core_config().error);
  if (is_attached(index)) return;
  const int first = first_device();
  const std::string last = std::to_string(end_device() - 1);
  const std::string visible = std::to_string(n) + " NeuronCore" + (n == 1 ? " is" : "s are") + " visible";
  // TorchNeuron's messages first (scripts match on them), then what to do.
  if (local_world_size() >= 0) {
    const std::string owned = "in a distributed job each process owns one NeuronCore, neuron:LOCAL_RANK (here neuron:" +
        std::to_string(first) + "); use torch.device(\"neuron\") for it";
    if (index >= 0 && index < first) {
      throw std::out_of_range("Attempted to access device that doesn't attach to this process, received " +
                              std::to_string(index) + " expected to be equal or greater than " +
                              std::to_string(first) + " (" + owned + ").");
    }
    throw std::out_of_range("Device index " + std::to_string(index) + " is out of range. Valid range is " +
                            std::to_string(first) + " to " + last + " for this process (" + owned + ").");
  }
  throw std::out_of_range("Device index " + std::to_string(index) + " is out of range. Valid range is 0 to " + last +
                          " for this process (" + visible +
                          "; set NEURON_RT_NUM_CORES or NEURON_RT_VISIBLE_CORES to see more).");
}

int current_device() noexcept { return tls_current_device >= 0 ? tls_current_device : first_device(); }

void set_device(int index) {
  check_device_index(index);
  tls_current_device = index;
}

int exchange_device(int index) {
  int old = current_device();
  if (index != old) set_device(index);
  return old;
}

CurrentDeviceScope::CurrentDeviceScope(int device) : previous_(tls_current_device) {
  if (device >= 0 && device != current_device()) set_device(device);
}

// previous_ was the current core, so it needs no check again.
CurrentDeviceScope::~CurrentDeviceScope() { tls_current_device = previous_; }

bool in_bad_fork() noexcept { return g_bad_fork.load(std::memory_order_relaxed); }
void mark_initialized() noexcept { g_initialized.store(true); }
bool is_initialized() noexcept { return g_initialized.load(); }

int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace neuron_rt
