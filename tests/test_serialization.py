"""torch.save / torch.load of neuron tensors and modules."""
import io

import pytest
import torch


def _saved(obj) -> io.BytesIO:
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return buf


def test_tensor_restores_to_neuron_by_default():
    x = torch.randn(3, 4).to("neuron:1")
    y = torch.load(_saved(x))
    assert y.device == torch.device("neuron:1") and torch.equal(y.cpu(), x.cpu())


@pytest.mark.parametrize(
    "map_location,expected",
    [
        ("cpu", "cpu"),
        ("neuron:1", "neuron:1"),
        (torch.device("neuron:0"), "neuron:0"),
        ({"neuron:1": "cpu"}, "cpu"),
        (lambda storage, loc: storage, "cpu"),
        (lambda storage, loc: storage.neuron(0), "neuron:0"),
    ],
)
def test_map_location(map_location, expected):
    x = torch.arange(5.0).to("neuron:1")
    y = torch.load(_saved({"x": x}), map_location=map_location)["x"]
    assert str(y.device) == expected
    assert torch.equal(y.cpu(), torch.arange(5.0))


def test_module_state_dict_round_trip():
    m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2)).neuron()
    buf = _saved(m.state_dict())
    sd = torch.load(buf)
    assert all(v.device.type == "neuron" for v in sd.values())
    m2 = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2)).neuron()
    m2.load_state_dict(sd)
    x = torch.randn(2, 4, device="neuron")
    assert torch.equal(m(x).cpu(), m2(x).cpu())
    whole = torch.load(_saved(m), weights_only=False)
    assert next(whole.parameters()).device.type == "neuron"


def test_views_keep_sharing_after_load():
    base = torch.arange(6.0, device="neuron")
    a, b = torch.load(_saved((base, base[2:])))
    a[3] = 42.0
    assert b[1].item() == 42.0


def test_missing_device_index_is_a_clear_error():
    x = torch.ones(2, device="neuron:1")
    buf = _saved(x)
    with pytest.raises(RuntimeError, match="device_count"):
        torch.load(buf, map_location={"neuron:1": "neuron:7"})
