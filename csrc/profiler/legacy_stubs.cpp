// The profiler stubs of PrivateUse1: what torch.autograd.profiler.profile(
// use_device="neuron") without Kineto (ProfilerState KINETO_PRIVATEUSE1_FALLBACK)
// calls around every operator to time it on the device. Kernels run
// synchronously on the calling thread, so a device event is a timestamp taken
// when it is recorded (as a neuron Event is), and the device time of an
// operator is the time between its two records.
#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/stubs/base.h>

#include <functional>
#include <memory>

#include "../runtime/device.h"

namespace torchneuron {
namespace {

using torch::profiler::impl::ProfilerVoidEventStub;

struct NeuronProfilerStubs final : public torch::profiler::impl::ProfilerStubs {
  void record(c10::DeviceIndex* device, ProfilerVoidEventStub* event, int64_t* cpu_ns) const override {
    if (device != nullptr) *device = static_cast<c10::DeviceIndex>(neuron_rt::current_device());
    // The CPU timestamp is the profiler's clock; the device one the runtime's.
    if (cpu_ns != nullptr) *cpu_ns = c10::getTime();
    *event = std::make_shared<int64_t>(neuron_rt::now_ns());
  }

  // Microseconds, as CUDA's stub reports.
  float elapsed(const ProfilerVoidEventStub* event, const ProfilerVoidEventStub* event2) const override {
    if (event == nullptr || event2 == nullptr || !*event || !*event2) return 0.f;
    const int64_t start = *static_cast<const int64_t*>(event->get());
    const int64_t end = *static_cast<const int64_t*>(event2->get());
    return static_cast<float>(end - start) / 1000.f;
  }

  void mark(const char* /*name*/) const override {}
  void rangePush(const char* /*name*/) const override {}
  void rangePop() const override {}
  bool enabled() const override { return true; }

  void onEachDevice(std::function<void(int)> op) const override {
    const int previous = neuron_rt::current_device();
    for (int d = neuron_rt::first_device(); d < neuron_rt::end_device(); ++d) {
      neuron_rt::set_device(d);
      op(d);
    }
    neuron_rt::set_device(previous);
  }

  // Work is complete when its call returns.
  void synchronize() const override {}
};

struct RegisterStubs {
  RegisterStubs() {
    static NeuronProfilerStubs stubs;
    torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  }
} register_stubs;

}  // namespace
}  // namespace torchneuron
