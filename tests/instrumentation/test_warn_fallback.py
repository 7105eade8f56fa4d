"""TORCHNEURON_EXT_WARN_FALLBACK in the package's one switch grammar (torchneuron_ext/_env.py, read by
csrc/backend/errors.h's env_flag): `false` used to turn the warning on (any value not starting with 0 did)."""
import pytest

from tests.conftest import run_python

CODE = """
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import torch, torchneuron_ext
        torch.special.bessel_j0(torch.ones(2, device="neuron"))  # an operator on the generic path
    print(sum("has no native neuron kernel" in str(w.message) for w in caught))
"""


@pytest.mark.parametrize("value, warns", [
    ("false", False), ("0", False), ("OFF", False), ("", False),
    ("1", True), (" Yes ", True), ("true", True),
])
def test_the_switch_reads_on_and_off_words(value, warns):
    r = run_python(CODE, env={"TORCHNEURON_EXT_WARN_FALLBACK": value}, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1" if warns else "0"]


def test_a_value_not_understood_names_the_variable_and_keeps_the_default():
    # Read while `import torch` loads the backend, where an error would make torch unimportable: a warning.
    r = run_python(CODE, env={"TORCHNEURON_EXT_WARN_FALLBACK": "bogus"}, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0"]
    assert ("TORCHNEURON_EXT_WARN_FALLBACK='bogus' is not understood: use 1 (or true/on/yes) to turn it on, "
            "0 (or false/off/no) to turn it off") in r.stderr
