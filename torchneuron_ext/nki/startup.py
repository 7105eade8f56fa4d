"""The interpreter start-up hook of the NKI import aliases (stdlib only: it runs before anything else).

With ``TORCHNEURON_EXT_NKI_COMPAT=1``, ``python kernel.py`` or ``pytest`` whose first import is
``neuronxcc.nki`` (or ``nki``, ``torch_neuronx``) must find the simulator although nothing imported
torch, whose autoload is what installs the aliases otherwise (compat.py). A ``.pth`` file in
site-packages executes this file at start-up; it installs a finder that costs nothing until one of
those names is imported, and only then imports torchneuron_ext (and torch) and hands over to
``torchneuron_ext.nki.compat``. A really installed package of that name still wins. The ``.pth`` file
is written by ``python -m torchneuron_ext.nki.compat --install-hook`` (see docs/nki.md).
"""
import importlib
import importlib.machinery
import sys

_TOP_LEVEL = ("neuronxcc", "nki", "torch_neuronx")
PTH_NAME = "torchneuron_ext_nki_compat.pth"
# The line of the .pth file: the variable is tested before anything else is done, so an interpreter that
# does not ask for the aliases pays one environment lookup.
PTH_LINE = ("import os; os.environ.get('TORCHNEURON_EXT_NKI_COMPAT', '').strip().lower() in "
            "('1', 'true', 'on', 'yes') and exec(open(os.path.join(os.path.dirname(__import__('importlib.util')"
            ".util.find_spec('torchneuron_ext').origin), 'nki', 'startup.py')).read(), "
            "{'__name__': 'torchneuron_ext_nki_startup'})\n")


class LazyCompatFinder:
    """Stands in for compat's finder until an aliased name is first imported."""

    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top not in _TOP_LEVEL:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        if importlib.machinery.PathFinder.find_spec(top) is not None:
            return None  # the real package is installed
        compat = importlib.import_module("torchneuron_ext.nki.compat")
        compat.install()
        return compat._finder.find_spec(name, path, target)


def install() -> None:
    if not any(type(f).__name__ == "LazyCompatFinder" for f in sys.meta_path):
        sys.meta_path.append(LazyCompatFinder())


if __name__ == "torchneuron_ext_nki_startup":  # executed by the .pth line
    install()
