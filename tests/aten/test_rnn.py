"""nn.LSTM / GRU / LSTMCell / GRUCell on neuron against CPU (issue 17 item 1): ATen sends
PrivateUse1 inputs to the fused cells (_thnn_fused_lstm_cell / _thnn_fused_gru_cell), which run
CUDA's cell on host views; forward, backward (first and second order), packed sequences,
bidirectional, multi-layer, projections."""
import copy

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

import torchneuron_ext  # noqa: F401
from torchneuron_ext import ops

TOL = dict(rtol=1e-4, atol=1e-5)


def pair(module_cpu):
    torch.manual_seed(0)
    return module_cpu, copy.deepcopy(module_cpu).to("neuron")


def grads(module):
    return [p.grad.cpu() for p in module.parameters()]


def outputs_cpu(out):
    if isinstance(out, torch.Tensor):
        return out.cpu()
    if isinstance(out, torch.nn.utils.rnn.PackedSequence):
        return pad_packed_sequence(out, batch_first=False)[0].cpu()
    return tuple(outputs_cpu(o) for o in out)


def loss_of(out):
    if isinstance(out, torch.nn.utils.rnn.PackedSequence):
        return out.data.pow(2).sum()
    if isinstance(out, torch.Tensor):
        return out.pow(2).sum()
    return sum(loss_of(o) for o in out)


def assert_matches_cpu(cpu, dev, out_c, out_d, inputs=()):
    """Outputs, then after backward the gradients of `inputs` ((device, cpu) pairs) and of every parameter."""
    torch.testing.assert_close(outputs_cpu(out_d), outputs_cpu(out_c), **TOL)
    loss_of(out_c).backward()
    loss_of(out_d).backward()
    for d, c in inputs:
        torch.testing.assert_close(d.grad.cpu(), c.grad, **TOL)
    for gd, gc in zip(grads(dev), grads(cpu)):
        torch.testing.assert_close(gd, gc, **TOL)


@pytest.mark.parametrize("kind", [nn.LSTM, nn.GRU])
@pytest.mark.parametrize("layers,bidirectional,batch_first,bias", [
    (1, False, False, True), (2, True, False, True), (3, False, True, False), (2, True, True, True)])
def test_rnn_matches_cpu(kind, layers, bidirectional, batch_first, bias):
    torch.manual_seed(1)
    cpu, dev = pair(kind(5, 7, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first, bias=bias))
    x = torch.randn((3, 4, 5) if batch_first else (4, 3, 5), requires_grad=True)
    xd = x.detach().to("neuron").requires_grad_()
    ops.clear_op_tracking()
    out_c, out_d = cpu(x), dev(xd)
    fused = "aten::_thnn_fused_lstm_cell" if kind is nn.LSTM else "aten::_thnn_fused_gru_cell"
    assert fused in ops.get_executed_ops()
    assert_matches_cpu(cpu, dev, out_c, out_d, [(xd, x)])


@pytest.mark.parametrize("kind", [nn.LSTM, nn.GRU])
def test_initial_state_and_packed_sequences(kind):
    torch.manual_seed(2)
    cpu, dev = pair(kind(4, 6, num_layers=2, bidirectional=True))
    x = torch.randn(5, 3, 4)
    lengths = torch.tensor([5, 3, 2])
    h0 = torch.randn(4, 3, 6, requires_grad=True)
    state_c = (h0, torch.randn(4, 3, 6, requires_grad=True)) if kind is nn.LSTM else h0
    state_d = tuple(s.detach().to("neuron").requires_grad_() for s in state_c) if kind is nn.LSTM else \
        h0.detach().to("neuron").requires_grad_()
    packed_c = pack_padded_sequence(x, lengths)
    packed_d = pack_padded_sequence(x.to("neuron"), lengths)
    out_c, out_d = cpu(packed_c, state_c), dev(packed_d, state_d)
    states = zip(state_d if kind is nn.LSTM else (state_d,), state_c if kind is nn.LSTM else (state_c,))
    assert_matches_cpu(cpu, dev, out_c, out_d, list(states))


def test_lstm_projection():
    torch.manual_seed(3)
    cpu, dev = pair(nn.LSTM(4, 8, proj_size=3, num_layers=2))
    x = torch.randn(6, 2, 4)
    out_c, out_d = cpu(x), dev(x.to("neuron"))
    assert_matches_cpu(cpu, dev, out_c, out_d)


@pytest.mark.parametrize("kind", [nn.LSTMCell, nn.GRUCell])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("with_state", [True, False])
def test_cells_match_cpu(kind, bias, with_state):
    torch.manual_seed(4)
    cpu, dev = pair(kind(5, 3, bias=bias))
    x = torch.randn(4, 5, requires_grad=True)
    xd = x.detach().to("neuron").requires_grad_()
    if with_state:
        h = torch.randn(4, 3)
        state_c = (h, torch.randn(4, 3)) if kind is nn.LSTMCell else h
        state_d = tuple(s.to("neuron") for s in state_c) if kind is nn.LSTMCell else h.to("neuron")
        out_c, out_d = cpu(x, state_c), dev(xd, state_d)
    else:
        out_c, out_d = cpu(x), dev(xd)
    assert_matches_cpu(cpu, dev, out_c, out_d, [(xd, x)])


@pytest.mark.parametrize("kind", [nn.LSTMCell, nn.GRUCell])
def test_cell_only_one_output_used_and_unbatched(kind):
    """LSTM backward with only h (or only c) used: the other gradient is undefined."""
    torch.manual_seed(5)
    cpu, dev = pair(kind(3, 2))
    x = torch.randn(3)  # unbatched
    out_c, out_d = cpu(x), dev(x.to("neuron"))
    first = (lambda o: o[1]) if kind is nn.LSTMCell else (lambda o: o)
    torch.testing.assert_close(outputs_cpu(out_d), outputs_cpu(out_c), **TOL)
    first(out_c).sum().backward()
    first(out_d).sum().backward()
    for gd, gc in zip(grads(dev), grads(cpu)):
        torch.testing.assert_close(gd, gc, **TOL)


@pytest.mark.parametrize("kind", [nn.LSTMCell, nn.GRUCell])
def test_cell_double_backward_and_gradcheck(kind):
    cell = kind(3, 2).double().to("neuron")
    x = torch.randn(2, 3, dtype=torch.float64, device="neuron", requires_grad=True)

    def f(inp):
        out = cell(inp)
        return out[0] if kind is nn.LSTMCell else out

    assert torch.autograd.gradcheck(f, (x,))
    assert torch.autograd.gradgradcheck(f, (x,))


def test_fused_cell_shape_error():
    with pytest.raises(RuntimeError, match=r"gates of shape \[batch, 4 \* hidden\] expected"):
        torch.ops.aten._thnn_fused_lstm_cell(torch.randn(2, 8, device="neuron"), torch.randn(2, 8, device="neuron"),
                                    torch.randn(2, 3, device="neuron"))


@pytest.mark.parametrize("kind", [nn.LSTM, nn.GRU, nn.LSTMCell, nn.GRUCell])
def test_compiled_matches_eager(kind):
    torch.manual_seed(6)
    cpu, dev = pair(kind(4, 3))
    x = torch.randn(5, 2, 4) if kind in (nn.LSTM, nn.GRU) else torch.randn(2, 4)
    compiled = torch.compile(dev, backend="aot_eager" if False else "inductor")
    out_c, out_d = cpu(x), compiled(x.to("neuron"))
    assert_matches_cpu(cpu, dev, out_c, out_d)
