#pragma once

#include <string>

namespace torchneuron {

// Registers the neuron (PrivateUse1) kernel of a custom operator that has a
// CPU kernel: the operator then runs on neuron tensors in the "custom" tier.
// A no-op if the operator already has a neuron kernel.
void register_custom_op_kernel(const std::string& qualified_name);

}  // namespace torchneuron
