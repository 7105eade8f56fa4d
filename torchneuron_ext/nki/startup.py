"""Where the start-up hook was before compat/ existed: .pth files written then execute this file.

The hook is torchneuron_ext/compat/startup.py now. A line written by an older
``python -m torchneuron_ext.nki.compat --install-hook`` executes this file's text under the name
``torchneuron_ext_nki_startup`` (without ``__file__``), so it finds the new file the way that line found
this one and executes it under the same name. Stdlib only: it runs at interpreter start-up.
"""
if __name__ == "torchneuron_ext_nki_startup":
    import importlib.util as _util
    import os as _os

    _path = _os.path.join(_os.path.dirname(_util.find_spec("torchneuron_ext").origin), "compat", "startup.py")
    with open(_path) as _f:
        exec(compile(_f.read(), _path, "exec"), {"__name__": "torchneuron_ext_nki_startup"})
