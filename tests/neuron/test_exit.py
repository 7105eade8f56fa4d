"""Jobs that end right after their work exit cleanly (bench/exit_stress.py runs 200 of them under load):
a backward on autograd's device threads, and a 2-rank DDP + SyncBatchNorm job whose last collective's
completion runs on gloo's thread, once aborted at interpreter exit ("terminate called without an active
exception")."""
import importlib.util
import os

spec = importlib.util.spec_from_file_location(
    "exit_stress", os.path.join(os.path.dirname(__file__), "..", "..", "bench", "exit_stress.py"))
exit_stress = importlib.util.module_from_spec(spec)
spec.loader.exec_module(exit_stress)


def test_backward_then_exit_on_device_threads_never_aborts():
    counts = exit_stress.run(jobs=6, load=1, kinds=["backward, device threads"], verbose=False)
    assert counts[("backward, device threads", "aborts")] == 0


def test_distributed_job_then_exit_never_aborts():
    counts = exit_stress.run(jobs=2, load=0, kinds=["2-rank DDP + SyncBatchNorm"], verbose=False)
    assert counts[("2-rank DDP + SyncBatchNorm", "aborts")] == 0
