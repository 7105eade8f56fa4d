"""Small NKI kernels shared by the PyTorch-integration tests (tests/nki/torch/)."""
import torch

import torchneuron_ext.nki as nki_new
import torchneuron_ext.nki.isa as nisa_new
import torchneuron_ext.nki.language as nl_new
import torchneuron_ext.nki.legacy as nki
import torchneuron_ext.nki.legacy.language as nl
import torchneuron_ext.nki.legacy.typing as nt

P = 128


@nki.jit
def add_kernel(a, b):
    """Outputs returned; SPMD grid over row tiles of 128: launch as add_kernel[rows // 128](a, b)."""
    c = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    ix = i * P + nl.arange(P)[:, None]
    iy = nl.arange(a.shape[1])[None, :]
    nl.store(c[ix, iy], value=nl.load(a[ix, iy]) + nl.load(b[ix, iy]))
    return c


@nki.jit
def add_into(a, b, c_out):
    """Outputs passed in (SDK <= 2.21 style): writes a + b into c_out, returns nothing."""
    for i in nl.affine_range(a.shape[0] // P):
        rows = slice(i * P, (i + 1) * P)
        nl.store(c_out[rows, :], value=nl.load(a[rows, :]) + nl.load(b[rows, :]))


@nki.jit
def scale_(a: nt.mutable_tensor, factor):
    """Updates ``a`` in place (a *= factor) and returns it (the legacy front end wants the annotation)."""
    for i in nl.affine_range(a.shape[0] // P):
        rows = slice(i * P, (i + 1) * P)
        nl.store(a[rows, :], value=nl.load(a[rows, :]) * factor)
    return a


@nki.jit
def axpy_(y: nt.mutable_tensor, x, alpha):
    """y += alpha * x in place, and also returns alpha * x as a new tensor."""
    ax = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // P):
        rows = slice(i * P, (i + 1) * P)
        t = nl.multiply(nl.load(x[rows, :]), alpha)
        nl.store(ax[rows, :], value=t)
        nl.store(y[rows, :], value=nl.load(y[rows, :]) + t)
    return y, ax


@nki.jit
def rms_norm_kernel(x, w, eps):
    """RMSNorm over the last dimension of a 2-D x whose rows are a multiple of 128."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    n, d = x.shape
    wt = nl.load(w.reshape((1, d)))
    for i in nl.affine_range(n // P):
        rows = slice(i * P, (i + 1) * P)
        t = nl.load(x[rows, :])
        r = nl.rsqrt(nl.mean(nl.square(t), axis=[1]) + eps)
        nl.store(out[rows, :], value=nl.multiply(nl.multiply(t, r), wt.broadcast_to((P, d))))
    return out


@nki.jit
def rms_norm_backward_kernel(x, w, g, eps):
    """Gradient of rms_norm_kernel with respect to x: (g*w - y_hat * mean(g*w*y_hat)) * r."""
    gx = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    n, d = x.shape
    wt = nl.load(w.reshape((1, d))).broadcast_to((P, d))
    for i in nl.affine_range(n // P):
        rows = slice(i * P, (i + 1) * P)
        t = nl.load(x[rows, :])
        gw = nl.multiply(nl.load(g[rows, :]), wt)
        r = nl.rsqrt(nl.mean(nl.square(t), axis=[1]) + eps)
        y_hat = nl.multiply(t, r)
        dot = nl.mean(nl.multiply(gw, y_hat), axis=[1])
        nl.store(gx[rows, :], value=nl.multiply(nl.subtract(gw, nl.multiply(y_hat, dot)), r))
    return gx


def rms_norm_op(namespace: str):
    """``<namespace>::rms_norm``, an nki_op over rms_norm_kernel whose backward is
    ``<namespace>::rms_norm_backward`` (rms_norm_backward_kernel) for x and torch for the weight.
    Each test module registers its own namespace: an operator can be defined once per process."""
    from torchneuron_ext.nki.torch import nki_op

    @nki_op(f"{namespace}::rms_norm", mutates_args=())
    def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
        return rms_norm_kernel(x, w, eps)

    @nki_op(f"{namespace}::rms_norm_backward", mutates_args=())
    def rms_norm_backward(x: torch.Tensor, w: torch.Tensor, g: torch.Tensor, eps: float) -> torch.Tensor:
        return rms_norm_backward_kernel(x, w, g, eps)

    def setup(ctx, inputs, output):
        x, w, eps = inputs
        ctx.save_for_backward(x, w)
        ctx.eps = eps

    def backward(ctx, g):
        x, w = ctx.saved_tensors
        r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + ctx.eps)
        return rms_norm_backward(x, w, g, ctx.eps), (g * x * r).sum(0), None

    rms_norm.register_autograd(backward, setup_context=setup)
    return rms_norm


def assert_rms_norm_matches_cpu(out: torch.Tensor, x: torch.Tensor, w: torch.Tensor, xc: torch.Tensor,
                                wc: torch.Tensor, eps: float) -> None:
    """out = an RMSNorm of the neuron leaves x, w (copies of the CPU tensors xc, wc) over the last dimension,
    after out.backward(ones): out, x.grad and w.grad are torch.rms_norm's on the CPU."""
    xr, wr = xc.clone().requires_grad_(), wc.clone().requires_grad_()
    ref = torch.rms_norm(xr, tuple(wc.shape), wr, eps)
    ref.backward(torch.ones_like(ref))
    torch.testing.assert_close(out.detach().cpu(), ref.detach())
    torch.testing.assert_close(x.grad.cpu(), xr.grad)
    torch.testing.assert_close(w.grad.cpu(), wr.grad)


@nki.jit
def relu_kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // P):
        rows = slice(i * P, (i + 1) * P)
        nl.store(out[rows, :], value=nl.maximum(nl.load(x[rows, :]), 0.0))
    return out


@nki_new.jit
def copy_new(src):
    """New dialect (destination passing): a tile-by-tile copy through SBUF."""
    out = nl_new.ndarray(src.shape, dtype=src.dtype, buffer=nl_new.shared_hbm)
    for i in nl_new.affine_range(src.shape[0] // P):
        t = nl_new.ndarray((P, src.shape[1]), dtype=src.dtype, buffer=nl_new.sbuf)
        nisa_new.dma_copy(dst=t, src=src[i * P:(i + 1) * P, :])
        nisa_new.dma_copy(dst=out[i * P:(i + 1) * P, :], src=t)
    return out
