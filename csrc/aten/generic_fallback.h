// The boxed host-kernel path shared by the generic fallback and custom
// operators: runs the operator's CPU kernel on zero-copy views of its neuron
// arguments through the kernel wrapper.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include "../instrumentation/op_tracking.h"

namespace torchneuron {

// The PrivateUse1 fallback: counted in the generic tier.
void generic_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack);

// Runs `op` on the stack's arguments with its CPU kernel, counted in `counter`.
void run_boxed_on_host(const c10::OperatorHandle& op, torch::jit::Stack* stack, OpCounter* counter);

}  // namespace torchneuron
