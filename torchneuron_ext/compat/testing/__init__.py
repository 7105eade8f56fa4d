"""Testing helpers: the pytest plugin and runner for TorchNeuron's own test suite (docs/torch_neuronx.md)."""
