"""`torchneuron-ext`: the command line of the emulated neuron device."""
from __future__ import annotations

import argparse
import platform
import sys
from typing import Optional, Sequence


def _info(args: argparse.Namespace) -> int:
    import torch

    import torchneuron_ext
    from torchneuron_ext import _C

    n = torch.neuron.device_count()
    print(f"torchneuron_ext {torchneuron_ext.__version__} (emulated AWS Trainium neuron device)")
    print(f"torch {torch.__version__}, Python {platform.python_version()}, {platform.machine()}")
    error = _C._config_error()
    if error:
        print(f"configuration error: {error}")
        return 1
    print(f"NeuronCores: {n} (from {_C._config_source()})")
    for i in range(n):
        p = torch.neuron.get_device_properties(i)
        free, total = torch.neuron.mem_get_info(i)
        print(
            f"  neuron:{i}  {p.core_type} of {p.name}, physical core {p.physical_core_id}, "
            f"HBM {_C._format_bytes(total)} ({_C._format_bytes(free)} free)"
        )
    print(f"autocast dtype: {str(torch.get_autocast_dtype('neuron')).replace('torch.', '')}")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="torchneuron-ext", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="print the emulated NeuronCores, their memory and versions").set_defaults(func=_info)
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
