"""Worker: what ranks see when the others disagree, die or stall.

TNX_SCENARIO selects the case: "mismatch" (shapes, dtypes, splits, kinds;
the group must stay usable afterwards), "dead_peer" (rank 1 exits mid-run),
"stalled_peer" (rank 1 stops calling collectives).
"""
from __future__ import annotations

import datetime
import os
import time

import torch
import torch.distributed as dist

from tests.distributed.launcher import write_result

DEV = torch.device("neuron")


def error_of(fn) -> str:
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the text is what the test checks
        return f"{type(e).__name__}: {e}"
    return "no error"


def mismatch(rank: int) -> dict[str, str]:
    out = {}
    shape = (4, 4) if rank == 0 else (8,)
    out["shape"] = error_of(lambda: dist.all_reduce(torch.ones(shape, device=DEV)))
    dtype = torch.float32 if rank == 0 else torch.int32  # same byte count: gloo alone would not notice
    out["dtype"] = error_of(lambda: dist.all_reduce(torch.ones(4, dtype=dtype, device=DEV)))
    out["kind"] = error_of(lambda: dist.all_reduce(torch.ones(4, device=DEV)) if rank == 0
                           else dist.broadcast(torch.ones(4, device=DEV), src=0))
    splits = [1, 1] if rank == 0 else [2, 0]
    out["splits"] = error_of(lambda: dist.all_to_all_single(torch.empty(2, device=DEV), torch.ones(2, device=DEV),
                                                            output_split_sizes=[1, 1], input_split_sizes=splits))
    chunk = (2, 3) if rank == 0 else (3, 2)  # same element count, different chunk shape
    out["all_gather"] = error_of(lambda: dist.all_gather_into_tensor(torch.empty(2 * 6, device=DEV),
                                                                     torch.ones(chunk, device=DEV)))
    out["rs_identical"] = error_of(lambda: dist.reduce_scatter(torch.empty(4, 4, device=DEV),
                                                               [torch.ones(4, 4, device=DEV)]))
    out["rs_ratio"] = error_of(lambda: dist.reduce_scatter(torch.empty(3, device=DEV), [torch.ones(8, device=DEV)]))
    out["rs_count"] = error_of(lambda: dist.reduce_scatter(torch.empty(2, device=DEV),
                                                           [torch.ones(2, device=DEV) for _ in range(3)]))
    out["rst_size"] = error_of(lambda: dist.reduce_scatter_tensor(torch.empty(10, device=DEV),
                                                                  torch.ones(21, device=DEV)))
    out["a2a_count"] = error_of(lambda: dist.all_to_all([torch.empty(3, device=DEV) for _ in range(2)],
                                                        [torch.ones(3, device=DEV)]))
    out["agc_layout"] = error_of(lambda: dist.all_gather_coalesced(
        [[torch.empty(2, device=DEV) for _ in range(2)] for _ in range(3)], [torch.ones(2, device=DEV)] * 3))
    out["async_shape"] = error_of(lambda: dist.all_reduce(torch.ones(rank + 1, device=DEV), async_op=True).wait())
    t = torch.full((3,), rank + 1.0, device=DEV)
    dist.all_reduce(t)  # still in step after every error above
    out["after"] = str(t.cpu().tolist())
    return out


def dead_peer(rank: int) -> dict[str, str]:
    t = torch.ones(4, device=DEV)
    dist.all_reduce(t)
    if rank == 1:
        os._exit(3)  # dies without a goodbye, as a crashed or OOM-killed worker does
    start = time.monotonic()
    message = error_of(lambda: [dist.all_reduce(t) for _ in range(3)])
    return {"error": message, "seconds": f"{time.monotonic() - start:.1f}"}


def stalled_peer(rank: int) -> dict[str, str]:
    t = torch.ones(4, device=DEV)
    dist.all_reduce(t)
    if rank == 1:
        time.sleep(6)  # alive, connected, but never joins the next collective (the timeout is 3 s)
        return {}
    start = time.monotonic()
    message = error_of(lambda: dist.all_reduce(t))
    return {"error": message, "seconds": f"{time.monotonic() - start:.1f}"}


def main() -> None:
    rank = int(os.environ["RANK"])
    scenario = os.environ["TNX_SCENARIO"]
    dist.init_process_group("neuron", timeout=datetime.timedelta(seconds=float(os.environ.get("TNX_TIMEOUT", "60"))))
    result = {"mismatch": mismatch, "dead_peer": dead_peer, "stalled_peer": stalled_peer}[scenario](rank)
    write_result(result)
    if scenario == "stalled_peer" and rank == 0:
        os._exit(0)  # the peer is gone from this collective; skip the teardown handshake
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
