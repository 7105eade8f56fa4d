#pragma once

namespace torchneuron {

// Registers a NestedTensorPrivateUse1 kernel for every aten operator that has a
// NestedTensorCPU one (nested_tensor.cpp says why the fallback is not enough).
// Returns how many were registered (-1 if already done).
int route_nested_kernels();

}  // namespace torchneuron
