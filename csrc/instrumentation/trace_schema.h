// The trace's vocabulary, defined once: what the Kineto plugin (profiler/kineto_plugin.cpp) names
// its events, lanes and metadata keys. _C._trace_schema() hands the same table to Python, where
// torchneuron_ext/instrumentation/trace_schema.py gives it to every reader of a trace (report, HTML
// viewer, cost model). No PyTorch types.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace torchneuron::trace_schema {

// The device's pseudo process in the trace viewer ("NC"); its threads are the lanes.
inline constexpr int32_t kNeuronPid = 0x4e43;

// Event names. A kernel is its op without "aten::" under this prefix (neuron::mul.Tensor,
// neuron::compiled::graph_0), so key_averages() lists it beside the host op that launched it.
inline constexpr const char* kKernelPrefix = "neuron::";
inline constexpr const char* kRuntimeKernel = "nrt_execute";    // the runtime span of a kernel
inline constexpr const char* kRuntimeCopy = "nrt_tensor_copy";  // the runtime span of a copy
// Copies: "Memcpy <direction> (...)"; readers take the direction from the second word.
inline constexpr const char* kCopyHtoD = "Memcpy HtoD (host -> neuron)";
inline constexpr const char* kCopyDtoH = "Memcpy DtoH (neuron -> host)";
inline constexpr const char* kCopyDtoD = "Memcpy DtoD (neuron -> neuron)";
inline constexpr const char* kCopyUnknown = "Memcpy";

// Metadata keys (an event's "args").
inline constexpr const char* kDevice = "device";
inline constexpr const char* kStream = "stream";
inline constexpr const char* kTier = "tier";
inline constexpr const char* kOp = "op";  // runtime spans: the op they dispatched
inline constexpr const char* kBytes = "bytes";
inline constexpr const char* kBytesRead = "bytes read";
inline constexpr const char* kBytesWritten = "bytes written";
inline constexpr const char* kFlops = "flops";
inline constexpr const char* kElements = "elements";
inline constexpr const char* kDtype = "dtype";
inline constexpr const char* kModelNs = "model ns";
inline constexpr const char* kGroupSize = "group size";
inline constexpr const char* kIn = "in";  // a compiled region's child kernel: kInCompiledRegion
inline constexpr const char* kInCompiledRegion = "compiled region";
// A launch that ran kernels of its own (a compiled graph) is written as the parts of its span its kernels do
// not cover, so no device time is written twice: part k of n, where it starts in the launch, the launch's span.
inline constexpr const char* kPart = "part";
inline constexpr const char* kParts = "parts";
inline constexpr const char* kLaunchOffsetNs = "launch offset ns";
inline constexpr const char* kLaunchNs = "launch ns";

// Lane (thread) names under kNeuronPid: "NC<core>" and one of these.
inline constexpr const char* kLaneHardware = " hardware (kernel execution)";
inline constexpr const char* kLaneTransfers = " transfers";
inline constexpr const char* kLaneCollectives = " collectives";
inline constexpr const char* kLaneRuntimeStream = " runtime stream ";  // followed by the stream id

// Every entry above as (Python name, value), for _C._trace_schema().
inline std::vector<std::pair<const char*, std::string>> entries() {
  return {{"NEURON_PID", std::to_string(kNeuronPid)},
          {"KERNEL_PREFIX", kKernelPrefix},
          {"RUNTIME_KERNEL", kRuntimeKernel},
          {"RUNTIME_COPY", kRuntimeCopy},
          {"COPY_HTOD", kCopyHtoD},
          {"COPY_DTOH", kCopyDtoH},
          {"COPY_DTOD", kCopyDtoD},
          {"COPY_UNKNOWN", kCopyUnknown},
          {"DEVICE", kDevice},
          {"STREAM", kStream},
          {"TIER", kTier},
          {"OP", kOp},
          {"BYTES", kBytes},
          {"BYTES_READ", kBytesRead},
          {"BYTES_WRITTEN", kBytesWritten},
          {"FLOPS", kFlops},
          {"ELEMENTS", kElements},
          {"DTYPE", kDtype},
          {"MODEL_NS", kModelNs},
          {"GROUP_SIZE", kGroupSize},
          {"IN", kIn},
          {"IN_COMPILED_REGION", kInCompiledRegion},
          {"PART", kPart},
          {"PARTS", kParts},
          {"LAUNCH_OFFSET_NS", kLaunchOffsetNs},
          {"LAUNCH_NS", kLaunchNs},
          {"LANE_HARDWARE", kLaneHardware},
          {"LANE_TRANSFERS", kLaneTransfers},
          {"LANE_COLLECTIVES", kLaneCollectives},
          {"LANE_RUNTIME_STREAM", kLaneRuntimeStream}};
}

}  // namespace torchneuron::trace_schema
