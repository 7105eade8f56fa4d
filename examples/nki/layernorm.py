"""LayerNorm over the last axis, y = (x - mean) / sqrt(var + eps) * gamma + beta, two ways per dialect.

- ``*_mean_var``: mean and variance from reductions (nl.mean / nisa.tensor_reduce).
- ``*_bn``: mean and variance from the Vector engine's batch-norm statistics: ``bn_stats`` on
  chunks of at most ``nl.tile_size.bn_stats_fmax`` (512) columns, then ``bn_aggr`` over the chunks.

The legacy kernels mask the last 128-row tile (and the last bn_stats chunk); the new ones slice it.
Run as a script (add ``--device neuron`` for neuron tensors) to check all four against torch.
"""
from __future__ import annotations

import math

import numpy as np
import torch

import torchneuron_ext.nki as nki
import torchneuron_ext.nki.isa as nisa
import torchneuron_ext.nki.language as nl
import torchneuron_ext.nki.legacy as lnki
import torchneuron_ext.nki.legacy.isa as lnisa
import torchneuron_ext.nki.legacy.language as lnl


def _check_params(x, gamma, beta):
    d = x.shape[1]
    assert gamma.shape == beta.shape == (d,), \
        f"gamma and beta must have shape ({d},) for x of shape {x.shape}, got {gamma.shape} and {beta.shape}"


def _load_params_legacy(gamma, beta, d):
    i_0 = lnl.arange(1)[:, None]
    i_f = lnl.arange(d)[None, :]
    g = lnl.load(gamma.reshape((1, d))[i_0, i_f]).broadcast_to((lnl.tile_size.pmax, d))
    b = lnl.load(beta.reshape((1, d))[i_0, i_f]).broadcast_to((lnl.tile_size.pmax, d))
    return g, b


def _layernorm_legacy(x, gamma, beta, eps, mean_var):
    """The legacy kernels' frame: per 128-row tile, mean and var from ``mean_var(t, i_p, valid)``, then
    y = (t - mean) * rsqrt(var + eps) * g + b, masked to the rows that exist."""
    rows, d = x.shape
    _check_params(x, gamma, beta)
    out = lnl.ndarray((rows, d), dtype=x.dtype, buffer=lnl.shared_hbm)
    g, b = _load_params_legacy(gamma, beta, d)
    i_p, i_f = lnl.mgrid[0:lnl.tile_size.pmax, 0:d]
    for i in lnl.affine_range(math.ceil(rows / lnl.tile_size.pmax)):
        row = i * lnl.tile_size.pmax + i_p
        t = lnl.load(x[row, i_f], mask=(row < rows))
        mean, var = mean_var(t, i_p, row < rows)
        inv_std = lnl.rsqrt(var + eps)
        normed = lnisa.tensor_scalar(t, op0=np.subtract, operand0=mean, op1=np.multiply, operand1=inv_std,
                                     mask=(row < rows))
        lnl.store(out[row, i_f], value=normed * g + b, mask=(row < rows))
    return out


def _mean_var_legacy(t, i_p, valid):
    return lnl.mean(t, axis=1, mask=valid), lnl.var(t, axis=1, mask=valid)


def _bn_mean_var_legacy(t, i_p, valid):
    d = t.shape[1]
    FMAX = lnl.tile_size.bn_stats_fmax
    i_chunk = lnl.arange(FMAX)[None, :]
    i_stat = lnl.arange(6)[None, :]
    chunks = math.ceil(d / FMAX)
    stats = lnl.ndarray((t.shape[0], 6 * chunks), dtype=np.float32)
    for j in lnl.affine_range(chunks):
        stats[i_p, j * 6 + i_stat] = lnisa.bn_stats(t[i_p, j * FMAX + i_chunk],
                                                    mask=(j * FMAX + i_chunk < d), dtype=np.float32)
    mean_var = lnisa.bn_aggr(stats)
    return mean_var[i_p, 0], mean_var[i_p, 1]


@lnki.jit
def layernorm_legacy_mean_var(x, gamma, beta, eps=1e-5):
    return _layernorm_legacy(x, gamma, beta, eps, _mean_var_legacy)


@lnki.jit
def layernorm_legacy_bn(x, gamma, beta, eps=1e-5):
    return _layernorm_legacy(x, gamma, beta, eps, _bn_mean_var_legacy)


def _load_params_new(gamma, beta, d):
    P = nl.tile_size.pmax
    g = nl.ndarray((P, d), dtype=gamma.dtype, buffer=nl.sbuf)
    b = nl.ndarray((P, d), dtype=beta.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=g, src=gamma.ap([[0, P], [1, d]], offset=0))  # stride 0: every partition reads the row
    nisa.dma_copy(dst=b, src=beta.ap([[0, P], [1, d]], offset=0))
    return g, b


def _normalize_new(out, x_tile, mean, var, g, b, eps, r0, n):
    """out[r0:r0+n] = (x - mean) * rsqrt(var + eps) * g + b for an n-row tile."""
    P, d = x_tile.shape
    inv_std = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=inv_std[0:n], data=var[0:n], op0=nl.add, operand0=eps)
    nisa.activation(dst=inv_std[0:n], op=nl.rsqrt, data=inv_std[0:n])
    y = nl.ndarray((P, d), dtype=out.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=y[0:n], data=x_tile[0:n], op0=nl.subtract, operand0=mean[0:n], op1=nl.multiply,
                       operand1=inv_std[0:n])
    nisa.tensor_tensor(dst=y[0:n], data1=y[0:n], data2=g[0:n], op=nl.multiply)
    nisa.tensor_tensor(dst=y[0:n], data1=y[0:n], data2=b[0:n], op=nl.add)
    nisa.dma_copy(dst=out[r0:r0 + n], src=y[0:n])


def _layernorm_new(x, gamma, beta, eps, mean_var):
    """The new kernels' frame: per tile of up to 128 rows, mean and var from ``mean_var(t, n)``, then
    _normalize_new."""
    rows, d = x.shape
    P = nl.tile_size.pmax
    _check_params(x, gamma, beta)
    out = nl.ndarray((rows, d), dtype=x.dtype, buffer=nl.shared_hbm)
    g, b = _load_params_new(gamma, beta, d)
    for r0 in range(0, rows, P):
        n = min(P, rows - r0)
        t = nl.ndarray((P, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:n], src=x[r0:r0 + n])
        mean, var = mean_var(t, n)
        _normalize_new(out, t, mean, var, g, b, eps, r0, n)
    return out


def _mean_var_new(t, n):
    P, d = t.shape
    mean = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=mean[0:n], op=nl.add, data=t[0:n], axis=1)
    nisa.tensor_scalar(dst=mean[0:n], data=mean[0:n], op0=nl.multiply, operand0=1.0 / d)
    centered = nl.ndarray((P, d), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=centered[0:n], data=t[0:n], op0=nl.subtract, operand0=mean[0:n])
    var = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    sq = nl.ndarray((P, d), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation_reduce(dst=sq[0:n], op=nl.square, data=centered[0:n], reduce_op=nl.add,
                           reduce_res=var[0:n], scale=1.0 / math.sqrt(d))
    return mean, var


def _bn_mean_var_new(t, n):
    P, d = t.shape
    FMAX = nl.tile_size.bn_stats_fmax
    chunks = math.ceil(d / FMAX)
    stats = nl.ndarray((P, 6 * chunks), dtype=nl.float32, buffer=nl.sbuf)
    for j in range(chunks):
        f0, f1 = j * FMAX, min(d, (j + 1) * FMAX)
        nisa.bn_stats(dst=stats[0:n, 6 * j:6 * j + 6], data=t[0:n, f0:f1])
    mean_var = nl.ndarray((P, 2), dtype=nl.float32, buffer=nl.sbuf)
    nisa.bn_aggr(dst=mean_var[0:n], data=stats[0:n])
    return mean_var[:, 0:1], mean_var[:, 1:2]


@nki.jit
def layernorm_new_mean_var(x, gamma, beta, eps=1e-5):
    return _layernorm_new(x, gamma, beta, eps, _mean_var_new)


@nki.jit
def layernorm_new_bn(x, gamma, beta, eps=1e-5):
    return _layernorm_new(x, gamma, beta, eps, _bn_mean_var_new)


KERNELS = {"legacy_mean_var": layernorm_legacy_mean_var, "legacy_bn": layernorm_legacy_bn,
           "new_mean_var": layernorm_new_mean_var, "new_bn": layernorm_new_bn}


def reference(x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    return torch.nn.functional.layer_norm(x.float(), (x.shape[-1],), gamma.float(), beta.float(), eps).to(x.dtype)


def main(device: str = "cpu") -> None:
    """Run the kernels on ``device`` tensors and compare with torch on CPU."""
    from _check import check, on_device
    on = on_device(device)
    torch.manual_seed(0)
    x, gamma, beta = torch.randn(300, 1100) * 3 + 1, torch.randn(1100), torch.randn(1100)
    for name, kernel in KERNELS.items():
        check(f"layernorm {name}, 300x1100", kernel(*on(x, gamma, beta)), reference(x, gamma, beta),
              atol=1e-4, rtol=1e-4)


if __name__ == "__main__":
    from _check import device_from_args
    main(device_from_args(__doc__.split("\n")[0]))
