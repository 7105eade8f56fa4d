"""``torch_neuronx.xla_impl``: of the XLA-era namespace only ``custom_op`` (Neuron's custom C++ operators,
``torchneuron_ext.custom_op``, see docs/custom_ops.md) exists on the emulated device."""
