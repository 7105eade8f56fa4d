// Injected inside `class at::Tensor` in the copy of ATen/core/TensorBody.h
// that custom-op libraries compile against. Neuron's device-side tensor has
// these methods, so kernels written for it (`t.tcm_accessor()`,
// `t.read_stream_accessor<float>()`) compile unchanged. Only non-virtual
// member functions are added: the class layout is PyTorch's. Definitions:
// torchneuron/gpsimd.h.
 public:
  template <typename T>
  ::torch::TensorReadStreamAccessor<T> read_stream_accessor() const&;
  template <typename T>
  ::torch::TensorWriteStreamAccessor<T> write_stream_accessor() &;
  ::torch::TensorTcmAccessor<true> tcm_accessor() const&;
  ::torch::TensorTcmAccessor<false> tcm_accessor() &;
  ::torch::CoherencyEnforcer::Policy get_accessor_coherence_policy() const;
  void set_accessor_coherence_policy(::torch::CoherencyEnforcer::Policy policy) const;

 private:
