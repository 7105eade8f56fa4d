#pragma once

namespace torchneuron {

// Registers the generic path for PrivateUse1 on every aten operator that has
// a CPU kernel and would otherwise take a composite kernel on neuron.
// Returns how many were routed (-1 if already done).
int route_composites_to_host_kernels();

}  // namespace torchneuron
