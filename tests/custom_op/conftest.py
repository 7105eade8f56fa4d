"""The custom-op libraries the tests use, built once per session and in parallel (a library is one
translation unit, so several builds keep both cores busy).

TORCHNEURON_EXT_TEST_BUILD_DIR=<dir> keeps the builds between sessions (ninja then finds them up
to date); by default they go to a fresh temporary directory, as in CI.
"""
from __future__ import annotations

import concurrent.futures
import os

import pytest

from torchneuron_ext import custom_op

HERE = os.path.dirname(os.path.abspath(__file__))
CSRC = os.path.join(HERE, "csrc")
EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples", "custom_op_relu")


def _csrc(*names: str) -> list[str]:
    return [os.path.join(CSRC, n) for n in names]


# name -> custom_op.build() arguments (without build_directory)
LIBRARIES = {
    "test_ops": dict(compute_srcs=_csrc("ops.cpp"), shape_srcs=_csrc("shapes.cpp")),
    "test_mc": dict(compute_srcs=_csrc("multicore.cpp"), shape_srcs=_csrc("multicore_shapes.cpp"), multicore=True),
    "relu": dict(compute_srcs=[os.path.join(EXAMPLE, "relu.cpp")], shape_srcs=[os.path.join(EXAMPLE, "shape.cpp")]),
    "broken": dict(compute_srcs=_csrc("broken_kernels.cpp"), shape_srcs=_csrc("broken_shapes.cpp")),
}


class Builds:
    """Starts every build at once; `path(name)` waits for one (and raises its error)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._pool = concurrent.futures.ThreadPoolExecutor(len(LIBRARIES))
        self._futures = {name: self._pool.submit(custom_op.build, name, **self.arguments(name)) for name in LIBRARIES}

    def arguments(self, name: str) -> dict:
        return dict(LIBRARIES[name], build_directory=os.path.join(self.root, name))

    def path(self, name: str) -> str:
        return self._futures[name].result()

    def error(self, name: str) -> BaseException | None:
        return self._futures[name].exception()

    def close(self) -> None:
        self._pool.shutdown(wait=True)


@pytest.fixture(scope="session")
def builds(tmp_path_factory) -> Builds:
    root = os.environ.get("TORCHNEURON_EXT_TEST_BUILD_DIR") or str(tmp_path_factory.mktemp("custom_op_builds"))
    b = Builds(root)
    yield b
    b.close()


@pytest.fixture(scope="session")
def test_ops(builds) -> custom_op.CustomOpLibrary:
    return custom_op.load_library(builds.path("test_ops"))


@pytest.fixture(scope="session")
def test_mc(builds) -> custom_op.CustomOpLibrary:
    return custom_op.load_library(builds.path("test_mc"))


@pytest.fixture(scope="session")
def relu_library(builds) -> custom_op.CustomOpLibrary:
    return custom_op.load_library(builds.path("relu"))
