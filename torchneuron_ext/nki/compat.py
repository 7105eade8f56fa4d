"""Former name of the import aliases, kept for ``torchneuron_ext.nki.compat.install()`` and
``python -m torchneuron_ext.nki.compat ...`` (docs/nki.md before compat/ existed).

The aliases are torchneuron_ext.compat.aliases, the hook torchneuron_ext.compat.startup and the command
line torchneuron_ext.compat.__main__: this module only re-exports their names, so their state is theirs.
It belongs to the compat layer (tools/import_graph.py), not to the NKI simulator.
"""
import sys

from ..compat.__main__ import USAGE, main
from ..compat.aliases import ENV_VAR, install, install_from_environment, installed, uninstall
from ..compat.startup import hook_path, install_hook, uninstall_hook

__all__ = ["ENV_VAR", "hook_path", "install", "install_from_environment", "install_hook", "installed", "main",
           "uninstall", "uninstall_hook", "USAGE"]

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
