#include "device.h"

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
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

thread_local int tls_current_device = 0;
std::atomic<bool> g_initialized{false};
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
  static const CoreConfig cfg = load_config();
  return cfg;
}

int device_count() noexcept {
  return static_cast<int>(core_config().physical_ids.size());
}

void check_device_index(int index) {
  const int n = device_count();
  if (n == 0 && !core_config().error.empty()) throw std::invalid_argument(core_config().error);
  if (index < 0 || index >= n) {
    // TorchNeuron's message first (scripts match on it), then what to do.
    throw std::out_of_range("Device index " + std::to_string(index) + " is out of range. Valid range is 0 to " +
                            std::to_string(n - 1) + " for this process (" + std::to_string(n) + " NeuronCore" +
                            (n == 1 ? " is" : "s are") +
                            " visible; set NEURON_RT_NUM_CORES or NEURON_RT_VISIBLE_CORES to see more).");
  }
}

int current_device() noexcept { return tls_current_device; }

void set_device(int index) {
  check_device_index(index);
  tls_current_device = index;
}

int exchange_device(int index) {
  int old = tls_current_device;
  if (index != old) set_device(index);
  return old;
}

CurrentDeviceScope::CurrentDeviceScope(int device) : previous_(tls_current_device) {
  if (device >= 0 && device != previous_) set_device(device);
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
