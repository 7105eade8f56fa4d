"""Worker: the rank's core is neuron:LOCAL_RANK on a node of LOCAL_WORLD_SIZE devices (TorchNeuron's numbering).

Run with torchrun's environment (the numbering is taken at import) and without LOCAL_WORLD_SIZE (the
process group's setup finds the ranks on this host through the store and renumbers then).
"""
from __future__ import annotations

import os

import torch
import torch.distributed as dist

from tests.distributed.launcher import Checks, write_result


def main() -> None:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    # Before init_process_group, as scripts do: the seed must reach the core the rank ends up owning.
    torch.manual_seed(1234)
    numbered_at_import = torch.neuron.device_count() == world and torch.neuron.current_device() == rank
    dist.init_process_group("neuron")
    c = Checks()
    other = (rank + 1) % world

    def numbering() -> None:
        assert numbered_at_import == bool(os.environ.get("LOCAL_WORLD_SIZE")), numbered_at_import
        assert os.environ["NEURON_RT_VISIBLE_CORES"] == str(rank), os.environ["NEURON_RT_VISIBLE_CORES"]
        assert torch.neuron.device_count() == world, torch.neuron.device_count()
        assert torch.neuron.current_device() == rank, torch.neuron.current_device()
        t = torch.ones(3, device="neuron")
        assert t.device == torch.device("neuron", rank), t.device
        assert torch.ones(1, device=f"neuron:{rank}").device.index == rank
        assert torch.neuron.get_device_properties(rank).physical_core_id == rank
        assert torch.neuron.get_device_properties(other).physical_core_id == -1
        assert len(torch.neuron.get_rng_state_all()) == 1
        torch.neuron.empty_cache()
        assert torch.neuron.memory_allocated() > 0

    def other_cores_refused() -> None:
        for index in (other, world):
            try:
                torch.ones(1, device=f"neuron:{index}")
            except RuntimeError as e:
                text = str(e)
            else:
                raise AssertionError(f"neuron:{index} was accepted on rank {rank}")
            expected = ("Attempted to access device that doesn't attach to this process" if index < rank
                        else f"Device index {index} is out of range. Valid range is {rank} to {rank} for this process")
            assert text.startswith(expected), text
        try:
            torch.neuron.set_device(other)
        except ValueError:
            pass
        else:
            raise AssertionError("set_device to another rank's core was accepted")

    def seed_followed_the_core() -> None:
        # The device draws the CPU's numbers for one seed; unseeded, the core would draw the default seed's.
        expected = torch.randn(4, generator=torch.Generator().manual_seed(1234))
        assert torch.equal(first_draw, expected), (first_draw, expected)

    def backward_on_the_rank_core() -> None:
        x = torch.randn(4, 4, device="neuron", requires_grad=True)
        (x * x).sum().backward()
        assert x.grad.device.index == rank, (x.device, x.grad.device)
        torch.testing.assert_close(x.grad.cpu(), 2 * x.detach().cpu())

    def collective() -> None:
        t = torch.full((2,), float(rank + 1), device="neuron")
        dist.all_reduce(t)
        torch.testing.assert_close(t.cpu(), torch.full((2,), float(world * (world + 1) // 2)))

    first_draw = torch.randn(4, device="neuron").cpu()  # the first draw since the seed
    for name, fn in [("numbering", numbering), ("other_cores_refused", other_cores_refused),
                     ("seed_followed_the_core", seed_followed_the_core),
                     ("backward_on_the_rank_core", backward_on_the_rank_core), ("collective", collective)]:
        c.run(name, fn)
    dist.destroy_process_group()
    write_result(c.results)


if __name__ == "__main__":
    main()
