"""``python -m torchneuron_ext.compat``: run a script or module with the import aliases, or (un)install
the start-up hook that makes ``TORCHNEURON_EXT_NKI_COMPAT=1`` work without this command."""
from __future__ import annotations

import os
import sys

from . import aliases, startup

USAGE = """usage: python -m torchneuron_ext.compat script.py [args...]
       python -m torchneuron_ext.compat -m module [args...]     (e.g. -m pytest test/unit)
       python -m torchneuron_ext.compat --install-hook [site-packages dir]
       python -m torchneuron_ext.compat --uninstall-hook [site-packages dir]
Runs a script or module with neuronxcc.nki, nki and torch_neuronx resolving to torchneuron_ext. The hook
makes TORCHNEURON_EXT_NKI_COMPAT=1 work for any interpreter of this environment, whatever it imports first.
(python -m torchneuron_ext.nki.compat, the former name, does the same.)"""


def main(argv: list[str]) -> int:
    """The command line; returns the exit status."""
    import runpy
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    if argv[0] in ("--install-hook", "--uninstall-hook"):
        directory = argv[1] if len(argv) > 1 else None
        if argv[0] == "--install-hook":
            print(f"wrote {startup.install_hook(directory)}")
        else:
            removed = startup.uninstall_hook(directory)
            print(f"removed {removed}" if removed else f"no hook at {startup.hook_path(directory)}")
        return 0
    aliases.install()
    if argv[0] == "-m":
        if len(argv) < 2:
            print(USAGE, file=sys.stderr)
            return 2
        sys.argv = [argv[1]] + list(argv[2:])
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        return 0
    sys.argv = list(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))  # as `python script.py` does
    runpy.run_path(argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
