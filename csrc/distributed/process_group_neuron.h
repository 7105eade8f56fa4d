// ProcessGroupNeuron: torch.distributed's c10d backend for the neuron device.
// It moves no bytes itself: every collective runs in gloo (the transport,
// which works across machines over TCP) on zero-copy host views of the
// neuron tensors, since device memory is host RAM here. On top of gloo it
// adds what the device needs: reductions gloo lacks (AVG, PREMUL_SUM), a
// cross-rank shape/dtype agreement check, lifetime of device tensors across
// async work, and a device activity per collective for the profiler.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <mutex>
#include <string>
#include <vector>

#include "neuron_work.h"
#include "signature_check.h"

namespace torchneuron::distributed {

class ProcessGroupNeuron final : public c10d::Backend {
 public:
  ProcessGroupNeuron(c10::intrusive_ptr<c10d::Backend> transport, int rank, int size, std::string group_name,
                     bool check_signatures);

  const std::string getBackendName() const override { return "neuron"; }
  c10::intrusive_ptr<c10d::Backend> transport() const { return transport_; }
  bool checks_enabled() const { return check_signatures_; }
  void setTimeout(std::chrono::milliseconds timeout) override { transport_->setTimeout(timeout); }
  void setSequenceNumberForGroup() override { transport_->setSequenceNumberForGroup(); }
  uint64_t getSequenceNumberForGroup() override { return transport_->getSequenceNumberForGroup(); }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;

 private:
  // Checks agreement (collectives), launches `start` on host views, and
  // wraps its Work. Inputs/outputs are the caller's tensors (for bytes and
  // lifetime); `finalize` runs after the transport completes.
  template <typename Start>
  c10::intrusive_ptr<c10d::Work> launch(const char* op, c10d::OpType type, const Signature* signature,
                                        const std::vector<at::Tensor>& inputs,
                                        const std::vector<at::Tensor>& outputs, std::vector<at::Tensor> keep,
                                        std::function<void()> finalize, Start&& start);
  // allreduce and its coalesced form: `start(views, options)` runs the transport's on the host views.
  template <typename CollectiveOptions, typename Start>
  c10::intrusive_ptr<c10d::Work> allreduce_in_place(const char* op, const char* public_name, c10d::OpType type,
                                                    CollectiveKind kind, std::vector<at::Tensor>& tensors,
                                                    const CollectiveOptions& opts, Start&& start);
  std::string describe(const char* op) const;

  c10::intrusive_ptr<c10d::Backend> transport_;
  std::string group_name_;
  bool check_signatures_;
  // Point-to-point works have no future in gloo; their tensors stay here
  // until the transport reports completion, even if the caller drops the Work.
  std::mutex pending_mu_;
  std::vector<c10::intrusive_ptr<NeuronWork>> pending_p2p_;
};

}  // namespace torchneuron::distributed
