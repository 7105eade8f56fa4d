# The one grammar of the package's environment switches (torchneuron_ext/_env.py): what turns a switch on
# and off, and what a value it does not understand does (an error naming it, or a warning at import).
import warnings

import pytest

from torchneuron_ext import _env


@pytest.mark.parametrize("value", ["1", "true", "ON", " yes "])
def test_on(value):
    assert _env.flag("X", environ={"X": value}) is True


@pytest.mark.parametrize("value", ["0", "false", "Off", "no"])
def test_off(value):
    assert _env.flag("X", default=True, environ={"X": value}) is False


def test_unset_and_empty_give_the_default():
    assert _env.flag("X", default=True, environ={}) is True
    assert _env.flag("X", default=True, environ={"X": "  "}) is True


def test_unknown_value_raises_naming_it():
    with pytest.raises(ValueError) as e:
        _env.flag("TORCHNEURON_EXT_X", environ={"TORCHNEURON_EXT_X": "maybe"})
    assert str(e.value) == ("TORCHNEURON_EXT_X='maybe' is not understood: use 1 (or true/on/yes) to turn it on, "
                            "0 (or false/off/no) to turn it off")


def test_unknown_value_warns_and_gives_the_default_when_asked():
    with pytest.warns(UserWarning, match="X='maybe' is not understood"):
        assert _env.flag("X", default=True, on_error="warn", environ={"X": "maybe"}) is True


def test_choice():
    assert _env.choice("M", ("host", "trainium"), "host", environ={"M": " Trainium"}) == "trainium"
    assert _env.choice("M", ("host", "trainium"), "host", environ={}) == "host"
    with pytest.raises(ValueError, match=r"^M='tpu' is not one of host, trainium$"):
        _env.choice("M", ("host", "trainium"), "host", environ={"M": "tpu"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning):
            _env.choice("M", ("host",), "host", on_error="warn", environ={"M": "x"})
