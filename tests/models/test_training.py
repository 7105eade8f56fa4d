"""One training step of third-party models on neuron against the same step on CPU: the loss, every
gradient (tied ones included) and every parameter after AdamW.

The neuron model's optimizer is built before `model.to("neuron")`, as scripts written for CUDA do:
that only trains the model if the move keeps the Parameter objects.
"""
import pytest
import torch

from .conftest import cpu_reference, family, fresh, tied_pairs


def _step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, batch: dict) -> torch.Tensor:
    torch.manual_seed(2)  # dropout draws the same numbers on both devices
    loss = model(**batch).loss
    loss.backward()
    optimizer.step()
    return loss.detach()


@pytest.mark.parametrize("optimizer_before_move", [True, False], ids=["optimizer-then-move", "move-then-optimizer"])
def test_training_step_matches_cpu(name, optimizer_before_move):
    f = family(name)
    cpu_model, model = fresh(name).train(), fresh(name).train()
    cpu_opt = torch.optim.AdamW(cpu_model.parameters(), lr=1e-3)
    expected = cpu_reference(lambda: _step(cpu_model, cpu_opt, f.batch("cpu")), f"{name} training step", name)

    if optimizer_before_move:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        model.to("neuron")
    else:
        model.to("neuron")
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss = _step(model, opt, f.batch("neuron"))

    assert tied_pairs(model) == tied_pairs(cpu_model)
    torch.testing.assert_close(loss.cpu(), expected, rtol=1e-5, atol=1e-5)
    params = dict(model.named_parameters())
    for pname, p in cpu_model.named_parameters():
        got = params[pname]
        assert got.device.type == "neuron", pname
        if p.grad is None:
            assert got.grad is None, f"{pname} has a gradient on neuron only"
            continue
        assert got.grad is not None, f"{pname} has no gradient on neuron"
        torch.testing.assert_close(got.grad.cpu(), p.grad, rtol=1e-4, atol=1e-5, msg=lambda m: f"grad {pname}: {m}")
        torch.testing.assert_close(got.detach().cpu(), p.detach(), rtol=1e-4, atol=1e-5,
                                   msg=lambda m: f"{pname} after AdamW: {m}")
    assert all(s["step"].device.type in ("cpu", "neuron") for s in opt.state.values())
    assert len(opt.state) == len(cpu_opt.state)
