"""The interpreter start-up hook (torchneuron_ext.compat.startup): TORCHNEURON_EXT_NKI_COMPAT=1 must work when
the first import is neuronxcc.nki, not torch; hooks written by earlier versions keep working."""
import os
import tempfile

from expecttest import TestCase

from tests.conftest import run_python
from torchneuron_ext.compat import startup

_ON = {"TORCHNEURON_EXT_NKI_COMPAT": "1"}

# In a fresh interpreter: forget any hook the environment already has, then process a site directory
# holding only the hook under test, as the interpreter does at start-up.
HOOK_SCRIPT = """
import sys, site
sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "LazyCompatFinder"]
site.addsitedir(sys.argv[1] if len(sys.argv) > 1 else HOOK_DIR)
print("finder:", sum(type(f).__name__ == "LazyCompatFinder" for f in sys.meta_path))
print("torch before:", "torch" in sys.modules)
try:
    import neuronxcc.nki.language as nl
    print("imported:", nl.__name__)
except ModuleNotFoundError as e:
    print("error:", e)
"""

# The line `python -m torchneuron_ext.nki.compat --install-hook` wrote before compat/ existed: it executes
# torchneuron_ext/nki/startup.py.
OLD_PTH_LINE = ("import os; os.environ.get('TORCHNEURON_EXT_NKI_COMPAT', '').strip().lower() in "
                "('1', 'true', 'on', 'yes') and exec(open(os.path.join(os.path.dirname(__import__('importlib.util')"
                ".util.find_spec('torchneuron_ext').origin), 'nki', 'startup.py')).read(), "
                "{'__name__': 'torchneuron_ext_nki_startup'})\n")


class TestStartupHook(TestCase):

    def _hook_dir(self) -> str:
        d = tempfile.mkdtemp()
        self.addCleanup(lambda: (startup.uninstall_hook(d), os.rmdir(d)))
        path = startup.install_hook(d)
        self.assertTrue(path.endswith("torchneuron_ext_nki_compat.pth"))
        return d

    def _start_up(self, d: str, env: dict[str, str]) -> list[str]:
        """The lines HOOK_SCRIPT prints in a fresh interpreter that starts up with the site directory d; it
        must exit cleanly."""
        r = run_python(HOOK_SCRIPT.replace("HOOK_DIR", repr(d)), env=env)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        return r.stdout.strip().splitlines()

    def test_first_import_is_neuronxcc(self) -> None:
        self.assertEqual(self._start_up(self._hook_dir(), _ON), [
            "finder: 1", "torch before: False", "imported: torchneuron_ext.nki.legacy.language"])

    def test_nothing_without_the_variable(self) -> None:
        self.assertEqual(self._start_up(self._hook_dir(), {"TORCHNEURON_EXT_NKI_COMPAT": "0"}), [
            "finder: 0", "torch before: False", "error: No module named 'neuronxcc'"])

    def test_hook_of_an_earlier_version(self) -> None:
        d = self._hook_dir()
        with open(startup.hook_path(d), "w") as f:
            f.write(OLD_PTH_LINE)
        self.assertEqual(self._start_up(d, _ON), [
            "finder: 1", "torch before: False", "imported: torchneuron_ext.nki.legacy.language"])

    def test_a_hook_without_the_package_stays_silent(self) -> None:
        # Another environment's interpreter, or the package uninstalled: the hook must not print a traceback
        # at every start-up.
        script = ("import sys\n"
                  "sys.meta_path[:] = [f for f in sys.meta_path\n"
                  "                    if 'Editable' not in getattr(f, '__name__', type(f).__name__)]\n"
                  "sys.path[:] = [p for p in sys.path if not __import__('os').path.isdir("
                  "__import__('os').path.join(p or '.', 'torchneuron_ext'))]\n" + HOOK_SCRIPT)
        r = run_python(script.replace("HOOK_DIR", repr(self._hook_dir())), env=_ON)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        self.assertNotIn("Error processing line", r.stderr)
        self.assertEqual(r.stdout.strip().splitlines()[:2], ["finder: 0", "torch before: False"])

    def test_uninstall_hook(self) -> None:
        d = self._hook_dir()
        self.assertTrue(os.path.exists(startup.hook_path(d)))
        self.assertEqual(startup.uninstall_hook(d), startup.hook_path(d))
        self.assertFalse(os.path.exists(startup.hook_path(d)))
        self.assertIsNone(startup.uninstall_hook(d))


class TestInstalledWithThePackage(TestCase):
    """`pip install` (editable or not) writes the hook, so TORCHNEURON_EXT_NKI_COMPAT=1 alone works."""

    def test_the_installed_distribution_lists_the_hook(self) -> None:
        import importlib.metadata
        import sysconfig
        try:
            files = importlib.metadata.files("torchneuron_ext") or []
        except importlib.metadata.PackageNotFoundError:
            self.skipTest("torchneuron_ext is imported from a tree, not installed")
        self.assertIn(startup.PTH_NAME, [str(f) for f in files])
        with open(os.path.join(sysconfig.get_paths()["purelib"], startup.PTH_NAME)) as f:
            self.assertEqual(f.read(), startup.pth_text())
