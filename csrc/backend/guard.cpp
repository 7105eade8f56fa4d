// The device guard: the one object through which PyTorch (DeviceGuard,
// torch.Stream / torch.Event, torch.accelerator, the autograd engine's device
// threads) reaches the runtime's devices, streams and events.
#include <c10/core/DeviceCapability.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include "../runtime/device.h"
#include "../runtime/stream.h"
#include "allocator.h"
#include "errors.h"

namespace torchneuron {
namespace {

using c10::Device;
using c10::DeviceIndex;
using c10::Stream;
constexpr auto kNeuron = c10::DeviceType::PrivateUse1;

// A device without an index (torch.Stream(device="neuron")) is the current one, as for CUDA.
DeviceIndex index_of(Device d) {
  return d.has_index() ? d.index() : static_cast<DeviceIndex>(neuron_rt::current_device());
}

Stream make_stream(DeviceIndex device, int64_t id) {
  return Stream(Stream::UNSAFE, Device(kNeuron, device), id);
}

void check_stream(const Stream& s) {
  TORCH_CHECK(s.device_type() == kNeuron, "Expected a neuron stream, but got a stream of ", s.device());
  TORCH_CHECK_VALUE(neuron_rt::StreamId::valid(s.id()), "Invalid neuron stream id ", s.id(),
                    ": neuron streams are the default stream (0) or pool streams 1..",
                    neuron_rt::kPriorityLevels * neuron_rt::kStreamsPerPriority, ".");
}

struct NeuronGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  NeuronGuardImpl() = default;

  c10::DeviceType type() const override { return kNeuron; }

  Device exchangeDevice(Device d) const override {
    TORCH_CHECK(d.type() == kNeuron, "Expected a neuron device, but got ", d);
    return Device(kNeuron, static_cast<DeviceIndex>(guarded([&] { return neuron_rt::exchange_device(index_of(d)); })));
  }

  Device getDevice() const override { return Device(kNeuron, static_cast<DeviceIndex>(neuron_rt::current_device())); }

  void setDevice(Device d) const override {
    TORCH_CHECK(d.type() == kNeuron, "Expected a neuron device, but got ", d);
    if (!d.has_index()) return;
    guarded([&] { neuron_rt::set_device(d.index()); });
  }

  void uncheckedSetDevice(Device d) const noexcept override {
    if (neuron_rt::is_attached(d.index())) {
      try {
        neuron_rt::set_device(d.index());
      } catch (...) {
      }
    }
  }

  Stream getStream(Device d) const override {
    const DeviceIndex i = index_of(d);
    return make_stream(i, neuron_rt::current_stream(i));
  }

  Stream getDefaultStream(Device d) const override { return make_stream(index_of(d), 0); }

  Stream getNewStream(Device d, int priority) const override {
    const DeviceIndex i = index_of(d);
    return make_stream(i, guarded([&] { return neuron_rt::stream_from_pool(i, priority); }));
  }

  Stream getStreamFromGlobalPool(Device d, bool high_priority) const override {
    return getNewStream(d, high_priority ? -1 : 0);
  }

  Stream exchangeStream(Stream s) const override {
    const auto old = neuron_rt::current_stream(s.device_index());
    neuron_rt::set_current_stream(s.device_index(), s.id());
    return make_stream(s.device_index(), old);
  }

  DeviceIndex deviceCount() const noexcept override { return static_cast<DeviceIndex>(neuron_rt::device_count()); }

  c10::DeviceCapability getDeviceCapability(Device /*d*/) const override {
    // Every dtype is stored and computed by host kernels.
    return c10::DeviceCapability();
  }

  void destroyEvent(void* event, const DeviceIndex /*device_index*/) const noexcept override {
    delete static_cast<neuron_rt::Event*>(event);
  }

  void record(void** event, const Stream& stream, const DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    check_stream(stream);
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(), "Event device index ", device_index,
                " does not match recording stream's device index ", stream.device_index(), ".");
    auto* e = static_cast<neuron_rt::Event*>(*event);
    if (e == nullptr) {
      e = new neuron_rt::Event();
      e->enable_timing = flag == c10::EventFlag::BACKEND_DEFAULT;
      *event = e;
    }
    guarded([&] { neuron_rt::event_record(e, stream.device_index(), stream.id()); });
  }

  // Work on `stream` may not start before the event's work finished. With
  // synchronous execution that work has already finished when the event was
  // recorded, so the wait is satisfied at once.
  void block(void* event, const Stream& stream) const override { check_stream(stream); }

  bool queryEvent(void* /*event*/) const override { return true; }
  bool queryStream(const Stream& stream) const override {
    check_stream(stream);
    return true;
  }
  void synchronizeStream(const Stream& stream) const override { check_stream(stream); }
  void synchronizeEvent(void* /*event*/) const override {}
  void synchronizeDevice(const DeviceIndex device_index) const override {
    guarded([&] { neuron_rt::check_device_index(device_index == -1 ? neuron_rt::current_device() : device_index); });
  }
  void recordDataPtrOnStream(const c10::DataPtr& /*data_ptr*/, const Stream& /*stream*/) const override {}

  double elapsedTime(void* event1, void* event2, const DeviceIndex /*device_index*/) const override {
    return guarded([&] {
      return neuron_rt::event_elapsed_ms(static_cast<neuron_rt::Event*>(event1), static_cast<neuron_rt::Event*>(event2));
    });
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, NeuronGuardImpl);

}  // namespace
}  // namespace torchneuron
