// The boxed host-kernel path shared by the generic fallback, custom operators
// and nested tensors: runs the operator's CPU kernel on zero-copy views of its neuron
// arguments through the kernel wrapper.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include "../instrumentation/op_tracking.h"

namespace torchneuron {

// The PrivateUse1 fallback: counted in the generic tier.
void generic_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack);

// Runs `op` on the stack's arguments with its kernel for `host_key` (the CPU's, or NestedTensorCPU for
// nested tensors), counted in `counter`.
void run_boxed_on_host(const c10::OperatorHandle& op, torch::jit::Stack* stack, OpCounter* counter,
                       c10::DispatchKey host_key = c10::DispatchKey::CPU);

}  // namespace torchneuron
