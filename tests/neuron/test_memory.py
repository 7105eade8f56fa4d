"""HBM capacity, the caching allocator and its statistics, pinned host memory."""
import random

import pytest
import torch
from expecttest import TestCase

from tests.conftest import run_python


def test_allocation_is_accounted_per_device():
    torch.neuron.empty_cache()
    base0 = torch.neuron.memory_allocated(0)
    base1 = torch.neuron.memory_allocated(1)
    x = torch.empty(1024, 1024, device="neuron:0")  # 4 MiB
    assert torch.neuron.memory_allocated(0) - base0 == 4 * 2**20
    assert torch.neuron.memory_allocated(1) == base1
    assert torch.neuron.memory_reserved(0) >= torch.neuron.memory_allocated(0)
    assert torch.accelerator.memory_allocated(0) == torch.neuron.memory_allocated(0)
    del x
    assert torch.neuron.memory_allocated(0) == base0
    # The freed block stays cached until empty_cache.
    reserved = torch.neuron.memory_reserved(0)
    assert reserved >= 4 * 2**20
    torch.neuron.empty_cache()
    assert torch.neuron.memory_reserved(0) < reserved


def test_cached_block_is_reused():
    torch.neuron.empty_cache()
    a = torch.empty(1000, device="neuron")
    ptr = a.data_ptr()
    del a
    b = torch.empty(1000, device="neuron")
    assert b.data_ptr() == ptr
    c = torch.empty(1000, device="neuron")
    assert c.data_ptr() != b.data_ptr()


def test_cached_blocks_best_fit_and_last_freed_first():
    torch.neuron.empty_cache()
    kib = lambda n: torch.empty(n * 256, device="neuron")  # noqa: E731  (n KiB of float32)
    # Size classes between 64 and 128 KiB are 16 KiB apart: 64, 80, 96, 112, 128.
    blocks = [kib(64), kib(64), kib(80), kib(96), kib(128)]
    p64a, p64b, p80, p96, p128 = (t.data_ptr() for t in blocks)
    for i in range(len(blocks)):  # freed in order: the second 64 KiB block after the first
        blocks[i] = None
    first, second = kib(64), kib(64)
    assert (first.data_ptr(), second.data_ptr()) == (p64b, p64a)  # the block freed last comes first
    # The smallest cached size that fits, within 25% (80 KiB: up to 100 KiB), never the 128 KiB block.
    fits = [kib(70), kib(80), kib(80)]
    assert [t.data_ptr() for t in fits[:2]] == [p80, p96]
    assert fits[2].data_ptr() not in (p64a, p64b, p80, p96, p128)


def test_cache_churn_keeps_blocks_apart_and_stats_balanced():
    torch.neuron.empty_cache()
    base = torch.neuron.memory_allocated()
    rng = random.Random(0)
    live = {}
    for i in range(3000):
        if live and rng.random() < 0.5:
            del live[rng.choice(list(live))]
        else:
            t = torch.empty(rng.choice([64, 1000, 4096, 5000, 2**18, 300000]), device="neuron")
            spans = [(k.data_ptr(), k.data_ptr() + k.nbytes) for k in live.values()]
            assert all(t.data_ptr() + t.nbytes <= lo or t.data_ptr() >= hi for lo, hi in spans)
            live[i] = t
    live.clear()
    t = None
    assert torch.neuron.memory_allocated() == base
    torch.neuron.empty_cache()
    assert torch.neuron.memory_reserved() == torch.neuron.memory_allocated()  # every cached block released
    assert torch.zeros(10, device="neuron").add_(1).sum().item() == 10  # and the device still allocates


def test_devices_never_share_pointers():
    a = [torch.empty(100, device="neuron:0") for _ in range(10)]
    b = [torch.empty(100, device="neuron:1") for _ in range(10)]
    assert not {t.data_ptr() for t in a} & {t.data_ptr() for t in b}


def test_peaks_and_resets():
    torch.neuron.empty_cache()
    torch.neuron.reset_peak_memory_stats()
    start = torch.neuron.memory_allocated()
    x = torch.empty(2**20, device="neuron")  # 4 MiB
    del x
    assert torch.neuron.max_memory_allocated() - start == 4 * 2**20
    assert torch.neuron.max_memory_reserved() >= 4 * 2**20
    torch.neuron.reset_peak_memory_stats()
    assert torch.neuron.max_memory_allocated() == torch.neuron.memory_allocated()
    torch.neuron.reset_accumulated_memory_stats()
    stats = torch.neuron.memory_stats()
    assert stats["allocated_bytes.all.allocated"] == 0 and stats["num_ooms"] == 0


def test_memory_stats_keys():
    stats = torch.neuron.memory_stats()
    for metric in ("allocated_bytes", "reserved_bytes", "active_bytes"):
        for pool in ("all", "small_pool", "large_pool"):
            for field in ("current", "peak", "allocated", "freed"):
                assert f"{metric}.{pool}.{field}" in stats
    for key in ("num_ooms", "num_alloc_retries", "num_tensor_frees", "allocation_requests"):
        assert key in stats
    acc = torch.accelerator.memory_stats(0)
    assert acc["allocated_bytes.all.current"] == stats["allocated_bytes.all.current"]
    assert stats["reserved_bytes.all.current"] >= stats["allocated_bytes.all.current"] >= 0


def test_mem_get_info_tracks_reservation():
    torch.neuron.empty_cache()
    free, total = torch.neuron.mem_get_info()
    assert total == torch.neuron.get_device_properties().total_memory
    x = torch.empty(8 * 2**20, dtype=torch.uint8, device="neuron")
    free2, _ = torch.neuron.mem_get_info()
    assert free - free2 == 8 * 2**20
    assert torch.accelerator.get_memory_info(0) == torch.neuron.mem_get_info(0)
    del x


def test_no_leak_over_many_cycles():
    torch.neuron.empty_cache()
    start = torch.neuron.memory_allocated()
    rng = random.Random(0)
    live = []
    for i in range(10_000):
        live.append(torch.empty(rng.choice([1, 7, 100, 4096, 70_000, 300_000]), device="neuron"))
        if len(live) > 8 or rng.random() < 0.5:
            live.pop(rng.randrange(len(live)))
    live.clear()
    assert torch.neuron.memory_allocated() == start
    assert torch.neuron.memory_stats()["active.all.current"] == torch.neuron.memory_stats()["allocation.all.current"]


class TestOutOfMemory(TestCase):
    def test_oom_names_core_request_and_capacity_then_recovers(self):
        torch.neuron.empty_cache()
        torch.neuron.set_hbm_capacity("64MiB", device=1)
        try:
            keep = torch.empty(40 * 2**20, dtype=torch.uint8, device="neuron:1")
            ooms = torch.neuron.memory_stats(1)["num_ooms"]
            with self.assertRaises(torch.OutOfMemoryError) as cm:
                torch.empty(30 * 2**20, dtype=torch.uint8, device="neuron:1")
            self.assertExpectedInline(str(cm.exception).splitlines()[0], """neuron:1 out of memory. Tried to allocate 30.00 MiB. NeuronCore 1 has a total HBM capacity of 64.00 MiB, of which 40.00 MiB is allocated by tensors and 0 B is reserved but unallocated (cached); 24.00 MiB is free. Free tensors you no longer need, reduce the batch size, or raise the emulated capacity with NEURON_EMU_HBM_SIZE or torchneuron_ext.set_hbm_capacity().""")
            self.assertEqual(torch.neuron.memory_stats(1)["num_ooms"], ooms + 1)
            del keep
            again = torch.empty(30 * 2**20, dtype=torch.uint8, device="neuron:1")
            self.assertEqual(again.numel(), 30 * 2**20)
            del again
        finally:
            torch.neuron.empty_cache()
            torch.neuron.set_hbm_capacity(24 * 2**30, device=1)

    def test_cache_is_released_before_oom(self):
        torch.neuron.empty_cache()
        torch.neuron.set_hbm_capacity("64MiB", device=1)
        try:
            a = torch.empty(40 * 2**20, dtype=torch.uint8, device="neuron:1")
            del a  # cached, still reserved
            retries = torch.neuron.memory_stats(1)["num_alloc_retries"]
            b = torch.empty(50 * 2**20, dtype=torch.uint8, device="neuron:1")
            self.assertEqual(torch.neuron.memory_stats(1)["num_alloc_retries"], retries + 1)
            del b
        finally:
            torch.neuron.empty_cache()
            torch.neuron.set_hbm_capacity(24 * 2**30, device=1)

    def test_bad_capacity_values(self):
        with self.assertRaises(ValueError) as cm:
            torch.neuron.set_hbm_capacity("lots")
        self.assertExpectedInline(str(cm.exception), """'lots' is not a size; use bytes or a unit, e.g. "24GiB" or "512MiB".""")
        keep = torch.empty(2**20, device="neuron:1")
        with self.assertRaises(ValueError) as cm:
            torch.neuron.set_hbm_capacity(1024, device=1)
        self.assertIn("is already in use", str(cm.exception))
        del keep


def test_default_oom_at_24_gib():
    with pytest.raises(torch.OutOfMemoryError, match="capacity of 24.00 GiB"):
        torch.empty(25 * 2**30, dtype=torch.uint8, device="neuron")
    assert torch.ones(3, device="neuron").sum().item() == 3


def test_host_refusing_memory_says_so():
    # Emulated HBM is host memory: within a capacity larger than the machine's memory, the host can
    # refuse an allocation the core has room for, and the error says which limit was hit.
    torch.neuron.empty_cache()
    torch.neuron.set_hbm_capacity(2**50, device=1)
    try:
        with pytest.raises(torch.OutOfMemoryError, match="the host refused the memory") as info:
            torch.empty(2**46, dtype=torch.uint8, device="neuron:1")  # 64 TiB
        assert "Tried to allocate 64.00 TiB" in str(info.value) and "free), but" in str(info.value)
        assert torch.ones(3, device="neuron:1").sum().item() == 3
    finally:
        torch.neuron.empty_cache()
        torch.neuron.set_hbm_capacity(24 * 2**30, device=1)


def test_host_shortage_releases_the_neuron_caches():
    # Emulated HBM is host memory: blocks one core keeps cached must not make the host refuse a CPU
    # tensor, pinned memory or another core's tensor (13 Hugging Face models in one process did).
    # A process limit stands in for a full machine; torch.empty commits no pages.
    r = run_python("""
        import resource, torch
        GiB = 2**30
        torch.ones(1, device="neuron:1")  # the runtime's own allocations come before the limit
        resource.setrlimit(resource.RLIMIT_DATA, (3 * GiB, 3 * GiB))

        def cache_on_core0():
            torch.empty(3 * GiB // 2, dtype=torch.uint8, device="neuron:0")
            assert torch.neuron.memory_reserved(0) >= 3 * GiB // 2

        for name, alloc in [("cpu", lambda: torch.empty(2 * GiB, dtype=torch.uint8)),
                            ("pinned", lambda: torch.empty(2 * GiB, dtype=torch.uint8, pin_memory=True)),
                            ("neuron:1", lambda: torch.empty(2 * GiB, dtype=torch.uint8, device="neuron:1"))]:
            cache_on_core0()
            t = alloc()
            print(name, t.numel() == 2 * GiB, torch.neuron.memory_reserved(0))
            del t
        keep = torch.empty(3 * GiB // 2, dtype=torch.uint8, device="neuron:0")  # in use: nothing to release
        try:
            torch.empty(2 * GiB, dtype=torch.uint8)
        except RuntimeError as e:
            print("refused", "can't allocate memory" in str(e))
        try:
            torch.empty(2 * GiB, dtype=torch.uint8, device="neuron:1")
        except torch.OutOfMemoryError as e:
            print("refused", "the host refused the memory" in str(e))
        print(torch.ones(3, device="neuron:1").sum().item())
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:-1] == ["cpu True 0", "pinned True 0", "neuron:1 True 0", "refused True",
                                          "refused True", "3.0"], r.stdout


def test_capacity_from_environment():
    r = run_python("""
        import torch
        print(torch.neuron.get_device_properties(0).total_memory)
        try:
            torch.empty(2 * 2**20, dtype=torch.uint8, device="neuron")
        except torch.OutOfMemoryError as e:
            print("OOM")
    """, env={"NEURON_EMU_HBM_SIZE": "1MiB"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(2**20), "OOM"]


def test_memory_summary_and_snapshot():
    x = torch.empty(1000, device="neuron")
    summary = torch.neuron.memory_summary()
    assert "neuron:0 memory summary" in summary and "Allocated memory" in summary and "Reserved memory" in summary
    snap = torch.neuron.memory_snapshot()
    assert any(s["state"] == "active_allocated" and s["address"] == x.data_ptr() for s in snap)


def test_pinned_memory():
    t = torch.arange(10.0)
    assert not t.is_pinned()
    p = t.pin_memory()
    assert p.is_pinned() and p[3:].is_pinned()
    assert torch.equal(p, t)
    assert p.to("neuron", non_blocking=True).cpu().equal(t)
    s = torch.ones(4).untyped_storage().pin_memory()
    assert s.is_pinned()
    assert torch.empty(3, pin_memory=True).is_pinned()
