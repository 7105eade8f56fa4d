"""Fork safety: a forked child of an initialised parent must not touch the device."""
import subprocess
import sys
import textwrap

from tests.conftest import run_python


def test_spawn_children_can_use_the_device(tmp_path):
    script = tmp_path / "spawn_child.py"
    script.write_text(textwrap.dedent("""
        import multiprocessing as mp, torch

        def child(q):
            q.put(torch.ones(2, device="neuron").sum().item())

        if __name__ == "__main__":
            torch.ones(1, device="neuron")
            ctx = mp.get_context("spawn")
            q = ctx.Queue(); p = ctx.Process(target=child, args=(q,)); p.start()
            print(q.get(timeout=120)); p.join(); print(p.exitcode)
    """))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["2.0", "0"]


def test_fork_before_init_is_fine_and_bad_fork_after():
    r = run_python("""
        import os, torch
        pid = os.fork()
        if pid == 0:
            ok = torch.ones(2, device="neuron").sum().item() == 2
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        print("child-before-init", os.WEXITSTATUS(status))
        torch.ones(1, device="neuron")  # the parent initialises the device
        pid = os.fork()
        if pid == 0:
            try:
                torch.ones(1, device="neuron")
                os._exit(4)
            except RuntimeError as e:
                msg = str(e)
                os._exit(0 if "forked subprocess" in msg and "'spawn'" in msg and torch.neuron._is_in_bad_fork() else 5)
        _, status = os.waitpid(pid, 0)
        print("child-after-init", os.WEXITSTATUS(status))
        print(torch.ones(3, device="neuron").sum().item())
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["child-before-init", "0", "child-after-init", "0", "3.0"]
