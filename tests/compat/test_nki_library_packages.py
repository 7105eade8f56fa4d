"""The runner's check of the third-party packages AWS's NKI Library harness imports (compat/nki_library_packages.py),
on fake checkouts of our own in the harness's layout; nothing of AWS's code is used."""
from __future__ import annotations

import io
import subprocess
import textwrap
from pathlib import Path
from unittest import mock

import pytest
from expecttest import TestCase

from torchneuron_ext.compat import nki_library_packages as packages
from torchneuron_ext.compat import nki_library_runner as runner

_CHECKOUT = {
    "pyproject.toml": """
        [project]
        name = "fake_library"
        dependencies = ["numpy"]
        [project.optional-dependencies]
        test = ["Zz-Tne-Html>=1.0", "zz_tne_metrics"]
    """,
    "test/__init__.py": "",
    "test/conftest.py": """
        import json
        import pytest
        import zz_tne_html.extras
        from .utils.helpers import helper

        def pytest_zz_tne_node(node):             # a hook a plugin declares, not pytest
            pass

        @pytest.hookimpl(optionalhook=True)
        def pytest_zz_opt_node(node):             # pytest takes it without its plugin
            pass
    """,
    "test/utils/__init__.py": "",
    "test/utils/helpers.py": """
        from __future__ import annotations
        import os
        from typing import TYPE_CHECKING
        import zz_tne_metrics
        import nki_cpu_simulator.nki as nki        # supplied by the plugin
        import test.utils.scripts.remote_lock     # a harness file the public tree lacks: not a package

        if TYPE_CHECKING:
            import zz_tne_typing_only
        try:
            import zz_tne_optional
        except ImportError:
            zz_tne_optional = None

        class Host:
            import zz_tne_class_body

        def helper():
            import zz_tne_inside_a_function
    """,
    "test/utils/unused.py": "import zz_tne_never_imported\n",
    "test/integration/__init__.py": "",
    "test/integration/alpha/__init__.py": "",
    "test/integration/alpha/test_a.py": """
        import numpy as np
        import neuron_dtypes
        from nkilib_src.nkilib import kernels
        import zz_tne_metrics                     # the conftest's already
        import zz_tne_reference
    """,
    "test/integration/beta/__init__.py": "",
    "test/integration/beta/test_b.py": "import zz_tne_only_in_beta\n",
    "src/nkilib_src/__init__.py": "",
    "src/nkilib_src/nkilib/__init__.py": "",
    "src/nkilib_src/nkilib/kernels.py": "from . import shared\nimport zz_tne_kernel_side\n",
    "src/nkilib_src/nkilib/shared.py": "import zz_tne_shared\n",
}
# Plugins that declare the hooks named pytest_zz_tne_* and pytest_zz_opt_*, as xdist declares pytest_configure_node.
_PLUGIN = {"zz_tne_plugin": ("zz-tne-plugin", ("pytest_zz_tne_",)),
           "zz_tne_opt_plugin": ("zz-tne-opt-plugin", ("pytest_zz_opt_",))}


def _write(root: Path, files: dict) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


class TestMissingPackages(TestCase):
    def setUp(self) -> None:
        import tempfile
        self._dir = tempfile.TemporaryDirectory()
        self.root = Path(self._dir.name)
        _write(self.root, _CHECKOUT)
        hooks = mock.patch.dict(packages.PLUGIN_HOOKS, _PLUGIN)
        hooks.start()
        self.addCleanup(hooks.stop)

    def tearDown(self) -> None:
        self._dir.cleanup()

    def test_the_imports_that_run_at_import_time_are_followed_through_the_checkout(self) -> None:
        found = packages.missing_packages(str(self.root), ["test/integration/alpha"])
        self.assertEqual([(m.module, m.file, m.line, m.in_conftest) for m in found], [
            ("zz_tne_html", "test/conftest.py", 4, True),
            ("zz_tne_metrics", "test/utils/helpers.py", 5, True),
            ("zz_tne_class_body", "test/utils/helpers.py", 17, True),
            ("zz_tne_plugin", "test/conftest.py", 7, True),  # its hook, after the conftest's imports
            ("zz_tne_shared", "src/nkilib_src/nkilib/shared.py", 1, False),
            ("zz_tne_kernel_side", "src/nkilib_src/nkilib/kernels.py", 2, False),
            ("zz_tne_reference", "test/integration/alpha/test_a.py", 6, False)])

    def test_a_selection_brings_only_its_own_tests(self) -> None:
        found = {m.module for m in packages.missing_packages(str(self.root), ["test/integration/beta/test_b.py::test"])}
        self.assertIn("zz_tne_only_in_beta", found)
        self.assertNotIn("zz_tne_reference", found)
        self.assertIn("zz_tne_html", found)  # the conftest above any selection

    def test_the_report_names_each_package_with_one_pip_line(self) -> None:
        found = packages.missing_packages(str(self.root), ["test/integration/alpha"])
        self.assertEqual([(m.hook, m.requirement) for m in found if m.module == "zz_tne_plugin"],
                         [("pytest_zz_tne_node", "zz-tne-plugin")])
        self.assertExpectedInline(packages.format_missing_packages(found, packages.pip_names(str(self.root))), """\
AWS's NKI Library tests need 7 package(s) this environment lacks:
  zz_tne_html         test/conftest.py:4 (a conftest: no test can be collected without it)
  zz_tne_metrics      test/utils/helpers.py:5 (a conftest: no test can be collected without it)
  zz_tne_class_body   test/utils/helpers.py:17 (a conftest: no test can be collected without it)
  zz_tne_plugin       test/conftest.py:7 (a conftest implements its hook pytest_zz_tne_node: pytest refuses the conftest without it)
  zz_tne_shared       src/nkilib_src/nkilib/shared.py:1 (tests importing it are collection errors)
  zz_tne_kernel_side  src/nkilib_src/nkilib/kernels.py:2 (tests importing it are collection errors)
  zz_tne_reference    test/integration/alpha/test_a.py:6 (tests importing it are collection errors)
install them: pip install Zz-Tne-Html zz_tne_metrics zz_tne_class_body zz-tne-plugin zz_tne_shared zz_tne_kernel_side zz_tne_reference  (zz_tne_class_body, zz_tne_shared, zz_tne_kernel_side, zz_tne_reference: the import name; AWS's pyproject.toml lists no package of that name)
""")

    def test_nothing_missing_says_nothing(self) -> None:
        self.assertEqual(packages.format_missing_packages([]), "")
        _write(self.root / "clean", {"test/conftest.py": "import pytest\n",
                                     "test/integration/test_ok.py": "import numpy\nimport nki\n"})
        self.assertEqual(packages.missing_packages(str(self.root / "clean"), ["test/integration"]), [])


def test_pip_names_without_a_pyproject_are_empty(tmp_path: Path) -> None:
    assert packages.pip_names(str(tmp_path)) == {}
    (tmp_path / "pyproject.toml").write_text("this is [not toml\n")
    assert packages.pip_names(str(tmp_path)) == {}


def test_the_runner_stops_before_pytest_when_a_conftest_needs_a_missing_package(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    _write(tmp_path, _CHECKOUT)

    def no_pytest(*args, **kwargs):
        raise AssertionError("pytest was started although the conftest cannot be imported")

    monkeypatch.setattr(subprocess, "call", no_pytest)
    monkeypatch.setattr(packages, "PLUGIN_HOOKS", {**packages.PLUGIN_HOOKS, **_PLUGIN})
    assert runner.run(str(tmp_path), out=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert err.startswith("torchneuron-ext nki-library: AWS's NKI Library tests need 8 package(s) this "
                          "environment lacks:\n  zz_tne_html"), err
    assert "zz_tne_only_in_beta  test/integration/beta/test_b.py:1 (tests importing it are collection errors)" in err
    assert "install them: pip install Zz-Tne-Html zz_tne_metrics " in err
    assert "  zz_tne_plugin        test/conftest.py:7 (a conftest implements its hook pytest_zz_tne_node" in err
