"""Generate csrc/aten/native_*.cpp: the native tier's registrations.

    python tools/gen_native_kernels.py            # writes them
    python tools/gen_native_kernels.py --check    # exit 1 naming the files this torch would change

Each listed operator overload that exists in the installed torch and has a
CPU kernel (not a CompositeImplicit one, which must keep its autograd
decomposition) is registered as an unboxed NativeKernel. Commit the output.
"""
from __future__ import annotations

import pathlib

import torch

ROOT = pathlib.Path(__file__).resolve().parent.parent

# (file stem, description, [op names with optional overload list])
GROUPS: dict[str, tuple[str, list[str]]] = {
    "elementwise": ("elementwise arithmetic, comparison and unary math, where, clamp", [
        "add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_", "neg", "neg_", "reciprocal", "reciprocal_",
        "pow", "pow_", "sqrt", "sqrt_", "rsqrt", "rsqrt_", "exp", "exp_", "log", "log_", "log1p", "expm1",
        "tanh", "tanh_", "sigmoid", "sigmoid_", "abs", "abs_", "sign", "sin", "cos", "erf", "floor", "ceil",
        "round", "trunc", "maximum", "minimum", "clamp", "clamp_", "clamp_min", "clamp_min_", "clamp_max",
        "clamp_max_", "lerp", "lerp_", "addcmul", "addcmul_", "addcdiv", "addcdiv_", "eq", "eq_", "ne", "ne_",
        "lt", "le", "gt", "ge", "logical_not", "logical_and", "logical_or", "bitwise_and", "bitwise_or",
        "bitwise_not", "where", "isnan", "isinf", "isneginf", "isposinf", "nan_to_num", "fill_", "zero_",
        "masked_fill", "masked_fill_", "copysign", "fmod", "remainder", "atan2", "tril", "triu", "tril_", "triu_",
    ]),
    "reductions_linalg": ("reductions and the matmul family", [
        "sum", "mean", "prod", "max", "min", "amax", "amin", "argmax", "argmin", "all", "any", "var", "std",
        "var_mean", "std_mean", "logsumexp", "mode", "median", "kthvalue", "norm", "linalg_vector_norm", "cumsum", "cumsum_", "sort", "topk",
        "mm", "bmm", "addmm", "addmm_", "baddbmm", "baddbmm_", "addbmm", "dot", "mv", "addmv", "addmv_", "_softmax",
        "_log_softmax", "_softmax_backward_data", "_log_softmax_backward_data",
    ]),
    "nn": ("neural-network layers, indexing, joining and dropout", [
        "relu", "relu_", "gelu", "gelu_", "gelu_backward", "silu", "silu_", "silu_backward", "threshold_backward",
        "sigmoid_backward", "tanh_backward", "leaky_relu", "leaky_relu_backward", "hardtanh", "hardtanh_backward",
        "native_layer_norm", "native_layer_norm_backward", "_fused_rms_norm", "_fused_rms_norm_backward",
        "native_batch_norm", "native_batch_norm_backward", "_native_batch_norm_legit",
        "_native_batch_norm_legit_no_training", "native_group_norm", "native_group_norm_backward",
        "embedding_dense_backward", "index_select", "index", "index_put_", "_index_put_impl_", "gather", "scatter",
        "scatter_", "scatter_add", "scatter_add_", "index_add_", "index_copy_", "masked_select", "nonzero",
        "cat", "_stack", "stack", "native_dropout", "native_dropout_backward",
        "max_pool2d_with_indices", "max_pool2d_with_indices_backward", "avg_pool2d", "avg_pool2d_backward",
        "_adaptive_avg_pool2d", "_adaptive_avg_pool2d_backward", "nll_loss_forward", "nll_loss_backward",
        "mse_loss", "mse_loss_backward", "binary_cross_entropy_with_logits", "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_flash_attention_for_cpu_backward", "upsample_nearest2d",
        "upsample_bilinear2d", "constant_pad_nd", "arange", "linspace", "randperm", "bernoulli_",
        "normal_", "uniform_", "random_", "multinomial",
    ]),
    "foreach": ("the _foreach_* ops and fused optimizers", [
        "_foreach_add", "_foreach_add_", "_foreach_sub", "_foreach_sub_", "_foreach_mul", "_foreach_mul_",
        "_foreach_div", "_foreach_div_", "_foreach_addcmul", "_foreach_addcmul_", "_foreach_addcdiv",
        "_foreach_addcdiv_", "_foreach_lerp", "_foreach_lerp_", "_foreach_sqrt", "_foreach_sqrt_", "_foreach_neg",
        "_foreach_neg_", "_foreach_maximum_", "_foreach_norm", "_foreach_zero_", "_foreach_copy_", "_foreach_pow",
        "_foreach_reciprocal_", "_foreach_sign", "_foreach_clamp_max_", "_foreach_clamp_min_", "_foreach_exp",
        "_fused_adam_", "_fused_adamw_", "_fused_sgd_", "_fused_adagrad_", "_amp_foreach_non_finite_check_and_unscale_",
        "_amp_update_scale_",
    ]),
}

# Overloads with a hand-written neuron kernel (which uses the native tier's kernel for the common case).
HANDWRITTEN = {
    # CUDA's half_to_float (float32 softmax of a half input, and its backward); native_softmax.cpp
    ("_softmax", ""), ("_log_softmax", ""), ("_softmax_backward_data", ""), ("_log_softmax_backward_data", ""),
    # PyTorch's structured in-place composite, which writes through tril.out / triu.out (TorchNeuron's kernels
    # for them); tracked_composites.cpp
    ("tril_", ""), ("triu_", ""),
}

# Composites that neuron runs as PyTorch's composite, as TorchNeuron does, so op tracking names the kernel
# that computes: torch.arange(...) is empty + aten::arange.start_out there.
AS_COMPOSITE = {("arange", ""), ("arange", "start"), ("arange", "start_step")}


def struct_name(name: str, overload: str) -> str:
    return f"{name}_{overload}" if overload else name


def eligible(qualified: str) -> bool:
    C = torch._C
    has = lambda key: C._dispatch_has_kernel_for_dispatch_key(qualified, key)  # noqa: E731
    try:
        has("CPU")
    except RuntimeError:  # a TorchScript-only overload (add.t, ...)
        return False
    if has("CompositeImplicitAutograd"):
        return False
    return has("CPU") or has("CompositeExplicitAutograd") or has("CompositeExplicitAutogradNonFunctional")


def collect(names: list[str]) -> list[tuple[str, str]]:
    out = []
    for name in names:
        packet = getattr(torch.ops.aten, name, None)
        if packet is None:
            continue
        for overload in packet.overloads():
            ov = "" if overload == "default" else overload
            qualified = f"aten::{name}" + (f".{ov}" if ov else "")
            if (name, ov) in HANDWRITTEN or (name, ov) in AS_COMPOSITE or not eligible(qualified):
                continue
            schema = getattr(packet, overload)._schema
            # Symbolic-int and dimname overloads are not host-kernel paths.
            if "Dimname" in str(schema) or ov.startswith("names") or "_Dimname" in ov:
                continue
            out.append((name, ov))
    return out


def render() -> dict[pathlib.Path, tuple[str, int]]:
    """Each generated file's path, text and number of overloads, for the installed torch."""
    out: dict[pathlib.Path, tuple[str, int]] = {}
    seen: set[tuple[str, str]] = set()
    for stem, (what, names) in GROUPS.items():
        ops = [op for op in collect(names) if op not in seen]
        seen.update(ops)
        lines = [
            f"// Generated by tools/gen_native_kernels.py: the native tier for {what}.",
            "// Each operator runs its host CPU kernel through the kernel wrapper, unboxed.",
            '#include "native_kernels.h"',
            "",
            "TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {",
        ]
        for name, ov in ops:
            lines.append(f"  NEURON_NATIVE(m, {struct_name(name, ov)});")
        lines.append("}")
        out[ROOT / "csrc" / "aten" / f"native_{stem}.cpp"] = ("\n".join(lines) + "\n", len(ops))
    return out


def stale() -> list[str]:
    """The generated files whose committed text differs from what this torch generates."""
    return [str(path.relative_to(ROOT)) for path, (text, _) in render().items()
            if not path.exists() or path.read_text() != text]


def main(argv: list[str]) -> int:
    if argv == ["--check"]:  # the committed output must be what this torch generates
        files = stale()
        for f in files:
            print(f"{f} is stale for torch {torch.__version__}: run python tools/gen_native_kernels.py")
        return 1 if files else 0
    for path, (text, count) in render().items():
        path.write_text(text)
        print(f"{path.name}: {count} overloads")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
