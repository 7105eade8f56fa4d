"""Per-tensor backend metadata (c10::BackendMeta, PyTorch's PrivateUse1 extension point) on neuron:
set and read through torch._C._set/_get_tensor_metadata, kept by shallow copies and by torch.save /
torch.load (issue 17 item 9)."""
import io

import torch

import torchneuron_ext  # noqa: F401


def test_set_and_get():
    x = torch.randn(3, device="neuron")
    assert torch._C._get_tensor_metadata(x) == {}
    torch._C._set_tensor_metadata(x, {"neuron_layout": True})
    assert torch._C._get_tensor_metadata(x) == {"neuron_layout": True}
    torch._C._set_tensor_metadata(x, {"other": False})
    assert torch._C._get_tensor_metadata(x) == {"neuron_layout": True, "other": False}


def test_kept_by_shallow_copies_not_by_new_tensors():
    x = torch.randn(3, device="neuron")
    torch._C._set_tensor_metadata(x, {"tag": True})
    assert torch._C._get_tensor_metadata(x.detach()) == {"tag": True}
    p = torch.nn.Parameter(x)
    assert torch._C._get_tensor_metadata(p) == {"tag": True}
    assert torch._C._get_tensor_metadata(x + 1) == {}
    assert torch._C._get_tensor_metadata(x.cpu()) == {}


def test_kept_through_serialization():
    x = torch.randn(4, device="neuron").conj()
    torch._C._set_tensor_metadata(x, {"tag": True})
    buf = io.BytesIO()
    torch.save({"x": x}, buf)
    buf.seek(0)
    y = torch.load(buf)["x"]
    assert y.device == x.device
    assert torch._C._get_tensor_metadata(y) == {"tag": True}
    assert torch.equal(y.cpu(), x.cpu())
