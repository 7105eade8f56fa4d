// The Kineto plugin: torch.profiler(activities=[..., ProfilerActivity.PrivateUse1])
// starts a session here, kernels append trace records while it runs, and at
// the end the records become Kineto activities:
//   hardware lane "NC<i> hardware"           CONCURRENT_KERNEL, one per kernel execution
//   runtime lane  "NC<i> runtime stream <s>" PRIVATEUSE1_RUNTIME, the dispatch span
//   transfer lane "NC<i> transfers"          GPU_MEMCPY with bytes and direction
// Each carries the correlation id of the op that launched it, so key_averages()
// fills "Self NEURON" / "NEURON total", and the Chrome trace draws the flow
// from the runtime event to the kernel. HBM usage is kept for the exporter.
// Device events never overlap on a core: torch counts every device event's whole
// duration as its self time, so a compiled graph is written as the parts of its
// launch its kernels leave uncovered (kPart of kParts) and its kernels as kernels.
#ifdef USE_KINETO

#include <GenericTraceActivity.h>
#include <IActivityProfiler.h>
#include <libkineto.h>
#include <output_base.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <time.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>

#include <c10/core/ScalarType.h>

#include "../instrumentation/op_tracking.h"
#include "../runtime/device.h"
#include "../instrumentation/trace_schema.h"
#include "../instrumentation/tracer.h"
#include "kineto_plugin.h"

namespace torchneuron {
namespace {

using libkineto::ActivityType;
// Names, lanes and metadata keys: instrumentation/trace_schema.h.
using namespace trace_schema;

// One pseudo process for the device in the trace viewer (kNeuronPid); lanes are threads.
constexpr int32_t kLanesPerCore = 64;
int32_t hardware_lane(int core) { return core * kLanesPerCore; }
int32_t runtime_lane(int core, int64_t stream) {
  return core * kLanesPerCore + 1 + static_cast<int32_t>(stream % (kLanesPerCore - 3));
}
// Collectives overlap the core's kernels (communication runs beside compute),
// so they get a lane of their own next to the transfers.
int32_t collective_lane(int core) { return core * kLanesPerCore + kLanesPerCore - 2; }
int32_t transfer_lane(int core) { return core * kLanesPerCore + kLanesPerCore - 1; }

int64_t clock_ns(clockid_t clock) {
  timespec t{};
  clock_gettime(clock, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}

// Our records are stamped on CLOCK_MONOTONIC, torch's ops on the wall clock: the trace needs the difference to
// the nanosecond, since a kernel's dispatch span starts tens of ns after the op that dispatched it. One realtime
// reading then one monotonic reading would be biased by the time between them (20-120 ns here: every device
// event drawn that much early, before its op). So the realtime reading is bracketed by two monotonic ones and
// paired with their midpoint, and of several tries the narrowest bracket wins (a try the scheduler interrupted
// is wide).
int64_t realtime_minus_monotonic() {
  int64_t best_offset = 0, best_width = INT64_MAX;
  for (int i = 0; i < 16; ++i) {
    const int64_t before = clock_ns(CLOCK_MONOTONIC);
    const int64_t real = clock_ns(CLOCK_REALTIME);
    const int64_t after = clock_ns(CLOCK_MONOTONIC);
    if (after - before < best_width) {
      best_width = after - before;
      best_offset = real - (before + (after - before) / 2);
    }
  }
  return best_offset;
}

// The offset from our clock to the trace's, agreeing with the ops torch recorded. torch stamps its ops on the
// TSC, converted to wall-clock ns by a fit of its own for the session; we stamp on CLOCK_MONOTONIC. The two
// conversions disagree by tens to hundreds of ns per session, more than an op takes to reach its kernel's
// dispatch (100-250 ns): read alone, `offset` drew a dispatch before the op that made it, its flow pointing
// back in time. But every record's host span lies inside the op it is linked to (the dispatch runs within the
// op), which bounds the offset from both sides: `offset` is moved to the nearest offset within the bounds,
// and kept when there is none (records and ops that contradict each other, which then say nothing).
int64_t aligned_to_ops(const std::vector<neuron_rt::TraceRecord>& records,
                       const libkineto::getLinkedActivityCallback& linked, int64_t offset) {
  if (!linked) return offset;
  int64_t lowest = LLONG_MIN, highest = LLONG_MAX;
  for (const auto& r : records) {
    if (r.kind == neuron_rt::TraceKind::kMemory || r.correlation == 0) continue;
    const libkineto::ITraceActivity* op = linked(static_cast<int32_t>(r.correlation));
    if (op == nullptr || op->type() != ActivityType::CPU_OP) continue;
    lowest = std::max(lowest, op->timestamp() - r.host_start);
    if (op->duration() > 0) highest = std::min(highest, op->timestamp() + op->duration() - r.host_end);
  }
  if (lowest > highest) return offset;
  return std::clamp(offset, lowest, highest);
}

// Device activities are named after the op without "aten::" under kKernelPrefix,
// so key_averages() shows the kernel beside, not on top of, the host op that
// launched it.
std::string kernel_name(const char* op) {
  std::string n(op);
  if (n.rfind("aten::", 0) == 0) n = n.substr(6);
  return kKernelPrefix + n;
}

const char* copy_name(neuron_rt::CopyKind k) {
  switch (k) {
    case neuron_rt::CopyKind::kHostToDevice: return kCopyHtoD;
    case neuron_rt::CopyKind::kDeviceToHost: return kCopyDtoH;
    case neuron_rt::CopyKind::kDeviceToDevice: return kCopyDtoD;
    default: return kCopyUnknown;
  }
}

// A record's span on the steady clock, ns.
using Interval = std::pair<int64_t, int64_t>;

// The spans of the records made inside compiled regions, per (core, thread), sorted: a region's children.
using ChildSpans = std::map<std::pair<int, uint64_t>, std::vector<Interval>>;

ChildSpans child_spans(const std::vector<neuron_rt::TraceRecord>& records) {
  ChildSpans out;
  for (const auto& r : records)
    if (r.nested && r.kind != neuron_rt::TraceKind::kMemory) out[{r.device, r.thread}].push_back({r.kernel_start, r.kernel_end});
  for (auto& [key, spans] : out) std::sort(spans.begin(), spans.end());
  return out;
}

// The parts of a record's span that no child covers; the whole span when it has no children (`split` false).
// A launch its children cover entirely keeps one empty part, so it is still counted once.
std::vector<Interval> own_parts(const neuron_rt::TraceRecord& r, const ChildSpans& children, bool* split) {
  *split = false;
  std::vector<Interval> parts;
  int64_t cursor = r.kernel_start;
  auto found = children.find({r.device, r.thread});
  if (found != children.end()) {
    const auto& spans = found->second;
    for (auto c = std::lower_bound(spans.begin(), spans.end(), Interval{r.kernel_start, LLONG_MIN});
         c != spans.end() && c->first < r.kernel_end; ++c) {
      if (c->second > r.kernel_end) continue;  // not inside this record
      if (c->first == r.kernel_start && c->second == r.kernel_end) continue;  // the record itself
      *split = true;
      if (c->first > cursor) parts.push_back({cursor, c->first});
      cursor = std::max(cursor, c->second);
    }
  }
  if (!*split) return {{r.kernel_start, r.kernel_end}};
  if (cursor < r.kernel_end || parts.empty()) parts.push_back({cursor, std::max(cursor, r.kernel_end)});
  return parts;
}

// What a device activity moved and computed: the cost model (torchneuron_ext/costmodel) projects from it.
void add_work_metadata(libkineto::GenericTraceActivity& a, const neuron_rt::TraceRecord& r) {
  a.addMetadata(kBytes, r.bytes_read + r.bytes_written);
  a.addMetadata(kBytesRead, r.bytes_read);
  a.addMetadata(kBytesWritten, r.bytes_written);
  if (r.flops) a.addMetadata(kFlops, r.flops);
  if (r.elements) a.addMetadata(kElements, r.elements);
  if (r.dtype >= 0) a.addMetadataQuoted(kDtype, c10::toString(static_cast<c10::ScalarType>(r.dtype)));
  if (r.model_ns) a.addMetadata(kModelNs, r.model_ns);
}

// Options from NeuronConfig, which torch passes through as a one-line JSON
// object ({"modes":"DEVICE,RUNTIME","capture_enabled_for_nc":"0,1","max_events_per_nc":0}).
struct CaptureOptions {
  bool device = true;
  bool runtime = true;
  std::set<int> cores;  // empty: all
  int64_t max_events_per_nc = 0;  // 0: no limit
};

std::string json_field(const std::string& json, const std::string& key) {
  const std::string k = "\"" + key + "\":";
  size_t p = json.find(k);
  if (p == std::string::npos) return "";
  p += k.size();
  if (p < json.size() && json[p] == '"') {
    size_t e = json.find('"', p + 1);
    return e == std::string::npos ? "" : json.substr(p + 1, e - p - 1);
  }
  size_t e = json.find_first_of(",}", p);
  return json.substr(p, e == std::string::npos ? std::string::npos : e - p);
}

CaptureOptions parse_options(const std::string& json) {
  CaptureOptions o;
  if (json.empty()) return o;
  const std::string modes = json_field(json, "modes");
  if (!modes.empty()) {
    o.device = modes.find("DEVICE") != std::string::npos;
    o.runtime = modes.find("RUNTIME") != std::string::npos;
  }
  const std::string cores = json_field(json, "capture_enabled_for_nc");
  if (!cores.empty()) {
    // NeuronConfig hands over a validated list; the runtime's parser (NEURON_RT_VISIBLE_CORES's grammar) still
    // refuses one no process could see (ids past the last physical core, more cores than a process has).
    std::string error;
    const std::vector<int> ids = neuron_rt::parse_core_list(cores, &error);
    if (error.empty()) {
      o.cores.insert(ids.begin(), ids.end());
    } else {
      TORCH_WARN("capture_enabled_for_nc='", cores, "': ", error, "; capturing every core.");
    }
  }
  const std::string max_events = json_field(json, "max_events_per_nc");
  if (!max_events.empty()) o.max_events_per_nc = std::atoll(max_events.c_str());
  return o;
}

std::mutex g_memory_mu;
std::vector<MemorySample> g_last_memory;

class NeuronProfilerSession final : public libkineto::IActivityProfilerSession {
 public:
  NeuronProfilerSession(std::set<ActivityType> types, CaptureOptions options)
      : types_(std::move(types)), options_(std::move(options)) {}

  void start() override {
    neuron_rt::clear_records();
    start_ns_ = neuron_rt::now_ns();
    neuron_rt::set_timing_bit(neuron_rt::kTimingTrace, true);
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    neuron_rt::set_timing_bit(neuron_rt::kTimingTrace, false);
    end_ns_ = neuron_rt::now_ns();
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger& logger) override { processTrace(logger, nullptr, 0, 0); }

  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked,
                    int64_t /*window_start*/, int64_t /*window_end*/) override {
    std::vector<neuron_rt::TraceRecord> records = neuron_rt::drain_records();
    if (!options_.cores.empty()) {
      records.erase(std::remove_if(records.begin(), records.end(),
                                   [&](const neuron_rt::TraceRecord& r) { return options_.cores.count(r.device) == 0; }),
                    records.end());
    }
    const int64_t offset = aligned_to_ops(records, linked, realtime_minus_monotonic());
    buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
    buffer_->span = libkineto::TraceSpan(start_ns_ + offset, end_ns_ + offset, "neuron");
    buffer_->gpuOpCount = 0;
    std::vector<MemorySample> memory;
    std::map<int, int64_t> events_per_core;
    // torch requires flow ids to start once; several device activities under
    // one op (the kernels of a compiled graph) keep the link, not the flow.
    std::set<uint64_t> flow_started;
    const ChildSpans children = child_spans(records);
    for (const auto& r : records) {
      if (r.kind == neuron_rt::TraceKind::kMemory) {
        memory.push_back({r.device, r.host_start + offset, r.allocated, r.reserved});
        continue;
      }
      if (options_.max_events_per_nc > 0 && ++events_per_core[r.device] > options_.max_events_per_nc) continue;
      const libkineto::ITraceActivity* op =
          (linked && r.correlation != 0) ? linked(static_cast<int32_t>(r.correlation)) : nullptr;
      // A region's kernels have no runtime span to start a flow from: they keep the link only.
      const bool flow = !r.nested && r.correlation != 0 && flow_started.insert(r.correlation).second;
      const bool copy = r.kind == neuron_rt::TraceKind::kMemcpy;
      const std::string tier = tier_name(static_cast<ExecutionTier>(r.tier));
      // The runtime span: dispatch on the host, from entry to exit. A kernel inside a compiled region was
      // launched by its region, not dispatched: it has none.
      if (!r.nested && options_.runtime && wants(ActivityType::PRIVATEUSE1_RUNTIME)) {
        buffer_->emplace_activity(buffer_->span, ActivityType::PRIVATEUSE1_RUNTIME,
                                  std::string(copy ? kRuntimeCopy : kRuntimeKernel));
        auto& a = *buffer_->activities.back();
        fill(a, r, r.host_start + offset, r.host_end + offset, runtime_lane(r.device, r.stream), op, flow);
        a.flow.start = 1;
        a.addMetadataQuoted(kOp, r.name);
        a.addMetadataQuoted(kTier, tier);
        a.addMetadata(kStream, r.stream);
        seen_.insert({r.device, runtime_lane(r.device, r.stream)});
        streams_[{r.device, runtime_lane(r.device, r.stream)}] = r.stream;
      }
      // The device work itself. A kernel inside a compiled region is a kernel of its own on the hardware lane,
      // linked to the op that ran it, and its time is taken out of its region's (own_parts).
      const bool kernel_lane = !copy || r.nested;
      if (options_.device && (kernel_lane ? wants(ActivityType::CONCURRENT_KERNEL) : wants(ActivityType::GPU_MEMCPY))) {
        const bool collective = static_cast<ExecutionTier>(r.tier) == ExecutionTier::kCollective;
        const int32_t lane = !kernel_lane ? transfer_lane(r.device)
                                          : (collective ? collective_lane(r.device) : hardware_lane(r.device));
        bool split = false;
        const std::vector<Interval> parts = kernel_lane && !collective
                                                ? own_parts(r, children, &split)
                                                : std::vector<Interval>{{r.kernel_start, r.kernel_end}};
        for (size_t k = 0; k < parts.size(); ++k) {
          buffer_->emplace_activity(buffer_->span,
                                    kernel_lane ? ActivityType::CONCURRENT_KERNEL : ActivityType::GPU_MEMCPY,
                                    kernel_lane ? kernel_name(r.name) : std::string(copy_name(r.copy)));
          auto& a = *buffer_->activities.back();
          fill(a, r, parts[k].first + offset, parts[k].second + offset, lane, op, flow && k == 0);
          a.flow.start = 0;
          a.addMetadata(kDevice, r.device);
          a.addMetadata(kStream, r.stream);
          a.addMetadataQuoted(kTier, tier);
          if (r.nested) a.addMetadataQuoted(kIn, kInCompiledRegion);
          if (split) {
            a.addMetadata(kPart, k + 1);
            a.addMetadata(kParts, parts.size());
            a.addMetadata(kLaunchOffsetNs, parts[k].first - r.kernel_start);
            a.addMetadata(kLaunchNs, r.kernel_end - r.kernel_start);
          }
          if (k == 0) {  // the launch's work, once
            add_work_metadata(a, r);
            // The group's ranks: a collective's steps and bandwidth (a subgroup is not the world).
            if (collective && r.group_size > 0) a.addMetadata(kGroupSize, r.group_size);
          }
          buffer_->gpuOpCount++;
        }
        seen_.insert({r.device, lane});
      }
    }
    // The logger keeps pointers; the buffer, handed to Kineto by
    // getTraceBuffer(), keeps the activities alive.
    for (const auto& a : buffer_->activities) logger.handleGenericActivity(*a);
    std::lock_guard<std::mutex> lock(g_memory_mu);
    g_last_memory = std::move(memory);
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    return std::make_unique<libkineto::DeviceInfo>(kNeuronPid, kNeuronPid, "Neuron (emulated)", "neuron");
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> out;
    for (const auto& [core, lane] : seen_) {
      std::string name;
      const int32_t offset = lane - core * kLanesPerCore;
      if (offset == 0) {
        name = "NC" + std::to_string(core) + kLaneHardware;
      } else if (offset == kLanesPerCore - 1) {
        name = "NC" + std::to_string(core) + kLaneTransfers;
      } else if (offset == kLanesPerCore - 2) {
        name = "NC" + std::to_string(core) + kLaneCollectives;
      } else {
        name = "NC" + std::to_string(core) + kLaneRuntimeStream + std::to_string(streams_[{core, lane}]);
      }
      out.push_back(libkineto::ResourceInfo(lane, lane, kNeuronPid, name));
    }
    return out;
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return std::move(buffer_); }

  void pushCorrelationId(uint64_t id) override { neuron_rt::push_correlation(id); }
  void popCorrelationId() override { neuron_rt::pop_correlation(); }

 private:
  bool wants(ActivityType t) const { return types_.empty() || types_.count(t) > 0; }

  void fill(libkineto::GenericTraceActivity& a, const neuron_rt::TraceRecord& r, int64_t start, int64_t end,
            int32_t lane, const libkineto::ITraceActivity* op, bool flow) {
    a.startTime = start;
    a.endTime = std::max(end, start);
    a.id = static_cast<int32_t>(r.correlation);
    a.device = kNeuronPid;
    a.resource = lane;
    a.threadId = lane;
    a.linked = op;
    if (flow) {
      a.flow.id = static_cast<uint32_t>(r.correlation);
      a.flow.type = libkineto::kLinkAsyncCpuGpu;
    }
  }

  std::set<ActivityType> types_;
  CaptureOptions options_;
  int64_t start_ns_ = 0, end_ns_ = 0;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
  std::set<std::pair<int, int32_t>> seen_;
  std::map<std::pair<int, int32_t>, int64_t> streams_;
};

class NeuronActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<ActivityType>& availableActivities() const override { return activities_; }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<ActivityType>& types,
                                                                 const libkineto::Config& config) override {
    std::set<ActivityType> wanted;
    for (auto t : types)
      if (activities_.count(t)) wanted.insert(t);
    return std::make_unique<NeuronProfilerSession>(wanted, parse_options(config.getCustomConfig()));
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t /*ts_ms*/, int64_t /*duration_ms*/,
                                                                 const std::set<ActivityType>& types,
                                                                 const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_{"neuron"};
  std::set<ActivityType> activities_{ActivityType::CONCURRENT_KERNEL, ActivityType::GPU_MEMCPY,
                                     ActivityType::GPU_MEMSET, ActivityType::PRIVATEUSE1_RUNTIME,
                                     ActivityType::PRIVATEUSE1_DRIVER};
};

REGISTER_PRIVATEUSE1_PROFILER(NeuronActivityProfiler);

}  // namespace

std::vector<MemorySample> last_memory_timeline() {
  std::lock_guard<std::mutex> lock(g_memory_mu);
  return g_last_memory;
}

}  // namespace torchneuron

#else  // !USE_KINETO

#include "kineto_plugin.h"

namespace torchneuron {

// Without Kineto there is no torch.profiler session to sample HBM in.
std::vector<MemorySample> last_memory_timeline() { return {}; }

}  // namespace torchneuron

#endif  // USE_KINETO
