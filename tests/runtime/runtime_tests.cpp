// Unit tests of the simulated Neuron runtime (csrc/runtime) on its own: no PyTorch, compiled with
// AddressSanitizer and UndefinedBehaviorSanitizer by tests/runtime/test_runtime_cpp.py, as OpenReg
// tests its runtime (third_party/openreg/tests). Run with NEURON_RT_NUM_CORES=4; with an argument,
// only the tests whose name starts with it run.
#include <atomic>
#include <cstdio>
#include <cstring>
#include <functional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/device.h"
#include "runtime/memory.h"
#include "runtime/stream.h"
#include "instrumentation/tracer.h"

namespace {

int g_failures = 0;
std::vector<std::pair<const char*, std::function<void()>>>& registry() {
  static std::vector<std::pair<const char*, std::function<void()>>> tests;
  return tests;
}
struct Register {
  Register(const char* name, std::function<void()> f) { registry().emplace_back(name, std::move(f)); }
};

#define TEST(name)                                   \
  void test_##name();                                \
  Register register_##name(#name, &test_##name);     \
  void test_##name()

#define CHECK(cond)                                                                    \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);   \
      ++g_failures;                                                                    \
    }                                                                                  \
  } while (0)

template <class E, class F>
bool throws(F f, const char* contains = "") {
  try {
    f();
  } catch (const E& e) {
    return std::strstr(e.what(), contains) != nullptr;
  }
  return false;
}

constexpr uint64_t kMiB = 1ull << 20;

// ---- device -------------------------------------------------------------------------------------

TEST(device_config) {
  CHECK(neuron_rt::device_count() == 4);
  CHECK(neuron_rt::core_config().error.empty());
  CHECK(neuron_rt::core_config().source == "NEURON_RT_NUM_CORES");
  CHECK(neuron_rt::core_config().physical_ids == std::vector<int>({0, 1, 2, 3}));
}

TEST(device_index_checks) {
  neuron_rt::check_device_index(3);
  CHECK(throws<std::out_of_range>([] { neuron_rt::check_device_index(4); }, "Valid range is 0 to 3"));
  CHECK(throws<std::out_of_range>([] { neuron_rt::check_device_index(-1); }));
  CHECK(throws<std::out_of_range>([] { neuron_rt::set_device(neuron_rt::kMaxCores); }));
  CHECK(neuron_rt::current_device() == 0);
}

TEST(device_exchange_and_scope) {
  CHECK(neuron_rt::exchange_device(2) == 0);
  CHECK(neuron_rt::current_device() == 2);
  {
    neuron_rt::CurrentDeviceScope scope(1);
    CHECK(neuron_rt::current_device() == 1);
    {
      neuron_rt::CurrentDeviceScope keep(-1);  // a negative index keeps the current core
      CHECK(neuron_rt::current_device() == 1);
    }
    CHECK(neuron_rt::current_device() == 1);
  }
  CHECK(neuron_rt::current_device() == 2);
  // A bad index throws before anything changes.
  CHECK(throws<std::out_of_range>([] { neuron_rt::CurrentDeviceScope bad(9); }));
  CHECK(neuron_rt::current_device() == 2);
  neuron_rt::set_device(0);
}

TEST(device_is_per_thread) {
  neuron_rt::set_device(3);
  int seen = -1;
  std::thread([&] { seen = neuron_rt::current_device(); }).join();
  CHECK(seen == 0);
  CHECK(neuron_rt::current_device() == 3);
  neuron_rt::set_device(0);
}

TEST(core_list_parsing) {
  std::string err;
  CHECK(neuron_rt::parse_core_list("0-3", &err) == std::vector<int>({0, 1, 2, 3}) && err.empty());
  CHECK(neuron_rt::parse_core_list(" 1, 3 ,5-6", &err) == std::vector<int>({1, 3, 5, 6}) && err.empty());
  for (const char* bad : {"", "1,,2", "3-1", "a", "1,1", "-2", "0-2000"}) {
    err.clear();
    CHECK(neuron_rt::parse_core_list(bad, &err).empty());
    CHECK(!err.empty());
  }
  err.clear();
  neuron_rt::parse_core_list("0-" + std::to_string(neuron_rt::kMaxCores), &err);  // kMaxCores + 1 cores
  CHECK(err.find("more than") != std::string::npos);
}

TEST(clock_is_monotonic) {
  const int64_t a = neuron_rt::now_ns();
  const int64_t b = neuron_rt::now_ns();
  CHECK(b >= a && a > 0);
}

// ---- memory -------------------------------------------------------------------------------------

TEST(memory_round_size) {
  CHECK(neuron_rt::round_size(1) == neuron_rt::kMinBlock);
  CHECK(neuron_rt::round_size(neuron_rt::kMinBlock) == neuron_rt::kMinBlock);
  for (size_t n : {size_t(1000), size_t(5000), size_t(123456), size_t(3 * kMiB + 1), size_t(100 * kMiB + 7)}) {
    const size_t r = neuron_rt::round_size(n);
    CHECK(r >= n);
    CHECK(r % neuron_rt::kMinBlock == 0);
    if (n > neuron_rt::kMinBlock && n <= neuron_rt::kSmallLimit) CHECK(r <= n + n / 4 + neuron_rt::kMinBlock);
  }
}

TEST(memory_alloc_free_and_stats) {
  auto& a = neuron_rt::core_allocator(1);
  a.empty_cache();
  const auto before = a.stats();
  void* p = a.malloc(1000);
  CHECK(p != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(p) % 64 == 0);
  std::memset(p, 0xab, 1000);  // ASan: the whole request is addressable
  CHECK(a.owns(p) && a.owns(static_cast<char*>(p) + 999) && a.owns_block(p));
  CHECK(!a.owns_block(static_cast<char*>(p) + 8));
  CHECK(neuron_rt::device_of_pointer(static_cast<char*>(p) + 10) == 1);
  auto s = a.stats();
  CHECK(s.allocation[neuron_rt::kAll].current == before.allocation[neuron_rt::kAll].current + 1);
  CHECK(s.allocation[neuron_rt::kSmall].current == before.allocation[neuron_rt::kSmall].current + 1);
  CHECK(s.requested_bytes[neuron_rt::kAll].current == before.requested_bytes[neuron_rt::kAll].current + 1000);
  CHECK(s.allocated_bytes[neuron_rt::kAll].current ==
        before.allocated_bytes[neuron_rt::kAll].current + static_cast<int64_t>(neuron_rt::round_size(1000)));
  a.free(p);
  CHECK(!a.owns(p));
  CHECK(neuron_rt::device_of_pointer(p) == -1);
  s = a.stats();
  CHECK(s.allocated_bytes[neuron_rt::kAll].current == before.allocated_bytes[neuron_rt::kAll].current);
  CHECK(s.reserved_bytes[neuron_rt::kAll].current > 0);  // cached, not returned
  a.empty_cache();
  CHECK(a.stats().reserved_bytes[neuron_rt::kAll].current == 0);
}

TEST(memory_cache_reuses_last_freed) {
  auto& a = neuron_rt::core_allocator(2);
  void* p = a.malloc(4096);
  void* q = a.malloc(4096);
  a.free(p);
  a.free(q);
  CHECK(a.malloc(4096) == q);  // the block freed last first
  CHECK(a.malloc(4000) == p);  // the same size class
  a.free(p);
  a.free(q);
  // A large block: its own pool.
  void* big = a.malloc(8 * kMiB);
  CHECK(a.stats().allocation[neuron_rt::kLarge].current == 1);
  a.free(big);
  CHECK(a.malloc(8 * kMiB) == big);
  a.free(big);
  a.empty_cache();
}

TEST(memory_double_free_is_ignored) {
  auto& a = neuron_rt::core_allocator(2);
  void* p = a.malloc(512);
  a.free(p);
  const auto frees = a.stats().num_tensor_frees;
  a.free(p);  // reported on stderr, not counted, the cache intact
  int local = 0;
  a.free(&local);
  CHECK(a.stats().num_tensor_frees == frees);
  a.empty_cache();
}

TEST(memory_capacity_and_oom) {
  auto& a = neuron_rt::core_allocator(3);
  const uint64_t old = a.capacity();
  a.set_capacity(16 * kMiB);
  CHECK(a.mem_info().second == 16 * kMiB);
  void* p = a.malloc(10 * kMiB);
  CHECK(a.mem_info().first <= 6 * kMiB);
  const auto ooms = a.stats().num_ooms;
  CHECK(throws<neuron_rt::OutOfMemory>([&] { a.malloc(10 * kMiB); }, "neuron:3"));
  CHECK(a.stats().num_ooms == ooms + 1);
  // Below what is in use: refused.
  CHECK(throws<std::invalid_argument>([&] { a.set_capacity(1 * kMiB); }));
  a.free(p);
  // The cached block is released when an allocation needs the room.
  void* q = a.malloc(12 * kMiB);
  CHECK(q != nullptr);
  a.free(q);
  a.empty_cache();
  a.set_capacity(old);
}

TEST(memory_adopt_and_snapshot) {
  auto& a = neuron_rt::core_allocator(0);
  a.empty_cache();
  const auto before = a.stats();
  std::vector<char> host_output(3000);
  a.adopt(host_output.data(), 3000);
  CHECK(a.stats().adopted_bytes == 3000);
  CHECK(a.stats().reserved_bytes[neuron_rt::kAll].current == before.reserved_bytes[neuron_rt::kAll].current + 3000);
  bool adopted_found = false;
  for (const auto& seg : a.snapshot())
    if (seg.address == reinterpret_cast<uintptr_t>(host_output.data()))
      adopted_found = seg.adopted && seg.in_use && seg.size == 3000 && seg.requested == 3000;
  CHECK(adopted_found);
  // Adopted memory is the host's: the core neither frees it nor hands it out again.
  CHECK(!a.owns_block(host_output.data()));
  CHECK(a.release_adopted(host_output.data()) == 3000);
  CHECK(a.stats().adopted_bytes == 0);
  CHECK(a.stats().reserved_bytes[neuron_rt::kAll].current == before.reserved_bytes[neuron_rt::kAll].current);
  for (const auto& seg : a.snapshot()) CHECK(seg.address != reinterpret_cast<uintptr_t>(host_output.data()));
  CHECK(a.release_adopted(host_output.data()) == 0);  // twice: ignored, with a warning
  a.adopt(host_output.data(), 3000);
  CHECK(throws<std::logic_error>([&] { a.adopt(host_output.data(), 3000); }, "adopted already"));
  a.release_adopted(host_output.data());
  void* p = a.malloc(2 * kMiB);
  bool found = false;
  for (const auto& seg : a.snapshot())
    if (seg.address == reinterpret_cast<uintptr_t>(p)) found = seg.in_use && !seg.small && seg.requested == 2 * kMiB;
  CHECK(found);
  a.free(p);
  a.reset_peak();
  a.reset_accumulated();
  const auto s = a.stats();
  CHECK(s.allocated_bytes[neuron_rt::kAll].peak == s.allocated_bytes[neuron_rt::kAll].current);
  CHECK(s.allocated_bytes[neuron_rt::kAll].allocated == 0);
  a.empty_cache();
}

TEST(memory_threads) {
  auto& a = neuron_rt::core_allocator(1);
  a.empty_cache();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&a, t] {
      std::vector<void*> live;
      for (int i = 0; i < 500; ++i) {
        void* p = a.malloc(256 * (1 + (i + t) % 17));
        std::memset(p, t, 256);
        live.push_back(p);
        if (i % 3 == 0) {
          a.free(live.front());
          live.erase(live.begin());
        }
      }
      for (void* p : live) a.free(p);
    });
  }
  for (auto& th : threads) th.join();
  const auto s = a.stats();
  CHECK(s.allocated_bytes[neuron_rt::kAll].current == 0);
  CHECK(s.allocation[neuron_rt::kAll].current == 0);
  a.empty_cache();
  CHECK(a.stats().reserved_bytes[neuron_rt::kAll].current == 0);
}

TEST(memory_bad_device) {
  CHECK(throws<std::out_of_range>([] { neuron_rt::core_allocator(4); }));
}

TEST(memory_bytes_text) {
  uint64_t v = 0;
  CHECK(neuron_rt::parse_bytes("24GiB", &v) && v == 24ull << 30);
  CHECK(neuron_rt::parse_bytes("512 MiB", &v) && v == 512 * kMiB);
  CHECK(neuron_rt::parse_bytes("1.5G", &v) && v == 3ull << 29);
  CHECK(neuron_rt::parse_bytes("123456", &v) && v == 123456);
  for (const char* bad : {"", "0", "-1", "12 parsecs", "inf"}) CHECK(!neuron_rt::parse_bytes(bad, &v));
  CHECK(neuron_rt::format_bytes(100) == "100 B");
  CHECK(neuron_rt::format_bytes(3 * kMiB / 2) == "1.50 MiB");
}

// ---- streams and events -------------------------------------------------------------------------

TEST(stream_ids) {
  using neuron_rt::StreamId;
  CHECK(StreamId::valid(0) && StreamId::valid(neuron_rt::kPriorityLevels * neuron_rt::kStreamsPerPriority));
  CHECK(!StreamId::valid(-1) && !StreamId::valid(neuron_rt::kPriorityLevels * neuron_rt::kStreamsPerPriority + 1));
  std::set<int64_t> normal;
  for (int i = 0; i < neuron_rt::kStreamsPerPriority; ++i) normal.insert(neuron_rt::stream_from_pool(1, 0));
  CHECK(static_cast<int>(normal.size()) == neuron_rt::kStreamsPerPriority);  // round-robin covers the pool
  CHECK(normal.count(neuron_rt::stream_from_pool(1, 0)) == 1);               // and wraps
  for (int64_t id : normal) CHECK(StreamId::priority(id) == 0);
  const int64_t high = neuron_rt::stream_from_pool(1, -5);  // clamped to the highest level
  CHECK(StreamId::priority(high) == -1 && StreamId::valid(high));
  CHECK(throws<std::out_of_range>([] { neuron_rt::stream_from_pool(7, 0); }));
}

TEST(stream_current_is_per_thread_and_core) {
  neuron_rt::set_current_stream(2, 5);
  CHECK(neuron_rt::current_stream(2) == 5 && neuron_rt::current_stream(1) == 0);
  int64_t seen = -1;
  std::thread([&] { seen = neuron_rt::current_stream(2); }).join();
  CHECK(seen == 0);
  neuron_rt::set_current_stream(2, 0);
  CHECK(neuron_rt::current_stream(-1) == 0 && neuron_rt::current_stream(neuron_rt::kMaxCores) == 0);
  neuron_rt::set_current_stream(neuron_rt::kMaxCores, 3);  // ignored, not out of bounds (ASan)
}

TEST(events) {
  neuron_rt::Event a, b, untimed;
  a.enable_timing = b.enable_timing = true;
  CHECK(throws<std::invalid_argument>([&] { neuron_rt::event_elapsed_ms(&a, &b); }, "recorded"));
  neuron_rt::event_record(&a, 1, 0);
  neuron_rt::event_record(&b, 1, 3);
  CHECK(a.recorded && a.device == 1 && b.stream == 3 && a.record_count == 1);
  CHECK(neuron_rt::event_elapsed_ms(&a, &b) >= 0);
  CHECK(throws<std::invalid_argument>([&] { neuron_rt::event_record(&a, 2, 0); }, "neuron:1"));
  neuron_rt::event_record(&untimed, 1, 0);
  CHECK(throws<std::invalid_argument>([&] { neuron_rt::event_elapsed_ms(&a, &untimed); }, "enable_timing"));
}

// ---- tracer -------------------------------------------------------------------------------------

TEST(tracer_timing_bits) {
  CHECK(neuron_rt::timing_mode() == 0);
  neuron_rt::set_timing_bit(neuron_rt::kTimingTrace, true);
  neuron_rt::set_timing_bit(neuron_rt::kTimingAggregate, true);
  CHECK(neuron_rt::timing_mode() == (neuron_rt::kTimingTrace | neuron_rt::kTimingAggregate));
  neuron_rt::set_timing_bit(neuron_rt::kTimingTrace, false);
  CHECK(neuron_rt::timing_mode() == neuron_rt::kTimingAggregate);
  neuron_rt::set_timing_bit(neuron_rt::kTimingAggregate, false);
  CHECK(neuron_rt::timing_mode() == 0);
}

TEST(tracer_records_from_threads) {
  neuron_rt::clear_records();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < 100; ++i) {
        neuron_rt::TraceRecord r;
        r.device = static_cast<int16_t>(t);
        r.host_start = i;
        r.name = "op";
        neuron_rt::record(r);
      }
    });
  }
  for (auto& th : threads) th.join();
  const auto records = neuron_rt::drain_records();
  CHECK(records.size() == 400);
  std::set<uint64_t> tids;
  int last[4] = {-1, -1, -1, -1};
  bool ordered = true;
  for (const auto& r : records) {
    tids.insert(r.thread);
    if (r.host_start <= last[r.device]) ordered = false;  // in time order per thread
    last[r.device] = static_cast<int>(r.host_start);
  }
  CHECK(tids.size() == 4 && ordered);
  CHECK(neuron_rt::drain_records().empty());  // drained
}

TEST(tracer_forgets_exited_threads_but_keeps_their_records) {
  neuron_rt::clear_records();
  neuron_rt::record(neuron_rt::TraceRecord{});  // this thread's buffer stays
  neuron_rt::clear_records();
  const size_t before = neuron_rt::registered_thread_buffers();
  for (int round = 0; round < 50; ++round) {  // short-lived threads, one after another
    std::thread([round] {
      neuron_rt::TraceRecord r;
      r.host_start = static_cast<uint64_t>(round);
      r.name = "op";
      neuron_rt::record(r);
    }).join();
  }
  CHECK(neuron_rt::registered_thread_buffers() == before);
  const auto records = neuron_rt::drain_records();
  CHECK(records.size() == 50);
  bool all = records.size() == 50;
  for (size_t i = 0; all && i < records.size(); ++i) all = records[i].host_start == i;
  CHECK(all);  // in the order the threads ran
  CHECK(neuron_rt::drain_records().empty());
}

TEST(tracer_correlation_and_regions) {
  CHECK(neuron_rt::current_correlation() == 0);
  neuron_rt::push_correlation(7);
  neuron_rt::push_correlation(9);
  CHECK(neuron_rt::current_correlation() == 9);
  uint64_t other = 1;
  std::thread([&] { other = neuron_rt::current_correlation(); }).join();
  CHECK(other == 0);
  neuron_rt::pop_correlation();
  CHECK(neuron_rt::current_correlation() == 7);
  neuron_rt::pop_correlation();
  neuron_rt::pop_correlation();  // unbalanced: harmless
  CHECK(neuron_rt::current_correlation() == 0);
  auto& r = neuron_rt::region();
  r.add_child(10, 20, 30, 5, -1);
  r.add_child(1, 2, 3, 50, 6);
  CHECK(r.bytes_read == 11 && r.bytes_written == 22 && r.flops == 33 && r.elements == 50 && r.dtype == 6);
  r = neuron_rt::RegionState();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string only = argc > 1 ? argv[1] : "";
  if (only == "config_error") {
    // Run alone, in a process whose NEURON_RT_VISIBLE_CORES is invalid (the configuration is read
    // once per process): no core, and an error that says why.
    CHECK(neuron_rt::device_count() == 0);
    CHECK(neuron_rt::core_config().error.find("NEURON_RT_VISIBLE_CORES") != std::string::npos);
    CHECK(throws<std::invalid_argument>([] { neuron_rt::check_device_index(0); }, "is invalid"));
  } else {
    int ran = 0;
    for (auto& [name, fn] : registry()) {
      if (std::string(name).rfind(only, 0) != 0) continue;
      const int before = g_failures;
      fn();
      std::printf("%s %s\n", g_failures == before ? "ok  " : "FAIL", name);
      ++ran;
    }
    std::printf("%d tests\n", ran);
  }
  std::printf("%d failures\n", g_failures);
  return g_failures == 0 ? 0 : 1;
}
