"""The interpreter start-up hook of the import aliases, and the .pth file that runs it.

With ``TORCHNEURON_EXT_NKI_COMPAT=1``, ``python kernel.py`` or ``pytest`` whose first import is
``neuronxcc.nki`` (or ``nki``, ``torch_neuronx``) must find the simulator although nothing imported
torch, whose autoload is what installs the aliases otherwise (aliases.py). A ``.pth`` file in
site-packages executes this file at start-up; it installs a finder that costs nothing until one of
those names is imported, and only then imports torchneuron_ext (and torch) and hands over to
``torchneuron_ext.compat.aliases``. A really installed package of that name still wins. The ``.pth`` file
is written by ``python -m torchneuron_ext.compat --install-hook`` (see docs/nki.md).

Stdlib only at module level: the .pth line executes this file before anything else is importable.
"""
import importlib
import importlib.machinery
import os
import sys
from typing import Any, Optional

# aliases._TOP_LEVEL (this file cannot import it; a test keeps the two equal).
_TOP_LEVEL = ("neuronxcc", "nki", "torch_neuronx", "nki_cpu_simulator", "neuron_dtypes")
PTH_NAME = "torchneuron_ext_nki_compat.pth"
# The line of the .pth file: the variable is tested before anything else is done, so an interpreter that
# does not ask for the aliases pays one environment lookup; where torchneuron_ext cannot be found (another
# environment's PYTHONPATH, an uninstalled package) it does nothing rather than print a traceback at
# start-up. The truthy values are _env.ON's: the line runs before torchneuron_ext can be imported, so it
# carries its own copy of them.
PTH_LINE = ("import os; os.environ.get('TORCHNEURON_EXT_NKI_COMPAT', '').strip().lower() in "
            "('1', 'true', 'on', 'yes') and (lambda s: s is not None and s.origin is not None and exec(open("
            "os.path.join(os.path.dirname(s.origin), 'compat', 'startup.py')).read(), "
            "{'__name__': 'torchneuron_ext_compat_startup'}))(__import__('importlib.util').util.find_spec("
            "'torchneuron_ext'))\n")
# What .pth files written before compat/ existed execute torchneuron_ext/nki/startup.py as (that stub
# executes this file under the same name).
_STARTUP_NAMES = ("torchneuron_ext_compat_startup", "torchneuron_ext_nki_startup")


class LazyCompatFinder:
    """Stands in for aliases.py's finder until an aliased name is first imported."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        top = name.partition(".")[0]
        if top not in _TOP_LEVEL:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(top)
        if spec is not None and spec.origin not in (None, "namespace"):
            return None  # the real package is installed (a namespace folder of that name is not: aliases.py)
        aliases = importlib.import_module("torchneuron_ext.compat.aliases")
        aliases.install()
        return aliases._finder.find_spec(name, path, target)


def install() -> None:
    """Put the lazy finder on sys.meta_path (once)."""
    if not any(type(f).__name__ == "LazyCompatFinder" for f in sys.meta_path):
        sys.meta_path.append(LazyCompatFinder())


def hook_path(directory: Optional[str] = None) -> str:
    """Where the start-up hook's .pth file goes: this environment's site-packages unless given."""
    import sysconfig
    return os.path.join(directory or sysconfig.get_paths()["purelib"], PTH_NAME)


def pth_text() -> str:
    """The .pth file's contents (setup.py installs it with the package; install_hook writes it by hand)."""
    return "# torchneuron_ext: NKI import aliases when TORCHNEURON_EXT_NKI_COMPAT=1 (docs/nki.md)\n" + PTH_LINE


def install_hook(directory: Optional[str] = None) -> str:
    """Write the .pth start-up hook; returns its path."""
    path = hook_path(directory)
    with open(path, "w") as f:
        f.write(pth_text())
    return path


def uninstall_hook(directory: Optional[str] = None) -> Optional[str]:
    """Remove the .pth start-up hook; its path, or None when there was none."""
    path = hook_path(directory)
    if os.path.exists(path):
        os.remove(path)
        return path
    return None


if __name__ in _STARTUP_NAMES:  # executed by the .pth line
    install()
