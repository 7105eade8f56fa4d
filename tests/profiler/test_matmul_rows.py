"""The trn2 GEMM rows of the validation table (bench/costmodel_rows/matmul.py): how their measured times are read
from the source, and the projections they are compared with, worked by hand."""
from __future__ import annotations

import os
import sys

import pytest

import torchneuron_ext  # noqa: F401

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))

from costmodel_rows import DEVICE, HOST, matmul  # noqa: E402

# The scoreboard's "MFU Estimated (%)" column (autotune/gemm/trn2-scoreboard.md @616e222b, LHS_T x RHS), beside
# the "Min (ms)" column the rows take as their measurement.
SCOREBOARD_MFU = {512: 6.2, 1024: 35.83, 1536: 65.19, 2048: 81.03, 2560: 88.34, 3072: 92.67, 3584: 93.88,
                  4096: 95.83, 4608: 96.68, 5120: 97.4}


def test_mfu_definition_reproduces_the_readme_pair():
    # kernel_library/README.md quotes one kernel both ways: 89.47% MFU at 0.2442 ms (2048^3).
    assert matmul.trn2_mfu_s(2048, 2048, 2048, 89.47) == pytest.approx(0.2442e-3, rel=5e-4)


@pytest.mark.parametrize("n", sorted(SCOREBOARD_MFU))
def test_scoreboard_times_match_its_mfu_column_at_one_core_bf16_peak(n):
    # Both columns come from one min_ms under the 2.4 GHz x 128 x 128 x 2 peak of one physical core: a time
    # read from the wrong row, or a peak of two cores (LNC=2) or FP32's quarter rate, would be off by far more
    # than the 3 decimals the table prints (under 2% at 512^3).
    measured_mfu = 100 * matmul.trn2_mfu_s(n, n, n, 100.0) / (matmul.SCOREBOARD_MS[n] * 1e-3)
    assert measured_mfu == pytest.approx(SCOREBOARD_MFU[n], rel=0.02)


def test_device_projection_at_2048_cubed_is_the_instruction_model_with_the_throttle_ramp():
    # 16 M tiles x 4 N tiles (512 wide) x 16 K tiles = 1024 full nc_matmul of 512 cycles at 2.4 GHz: 218.45 us,
    # plus trn2's Tensor Engine ramp (+0.75 us for any work from 2.25 us on); no launch.
    expected = 1024 * 512 / 2.4e9 + 0.75e-6
    assert matmul.device_gemm_s(2048, 2048, 2048, "bf16", "trn2:lnc=1") == pytest.approx(expected, rel=1e-9)


def test_host_projection_at_512_cubed_is_the_launch_and_the_operands_dma():
    # Three 512 x 512 bf16 tensors (1,572,864 B) at one physical trn2 core's HBM share (2.9 TB/s / 8): 4.34 us,
    # more than the Tensor Engine's 16 x 512 cycles + 0.75 us ramp (4.16 us); plus the 12 us launch.
    expected = 12e-6 + 3 * 512 * 512 * 2 / (2.9e12 / 8)
    assert matmul.eager_gemm_s(512, 512, 512, "bf16", "trn2:lnc=1") == pytest.approx(expected, rel=1e-6)


def test_trn2_rows_say_what_they_include_and_why_they_are_not_explained():
    rows = [r for r in matmul.ROWS if r.target == "trn2:lnc=1"]
    sweep = [r for r in rows if r.includes == HOST]
    assert sorted(int(r.shape.split("^")[0]) for r in sweep) == sorted(matmul.SCOREBOARD_MS)
    assert {r.shape for r in sweep if r.reason} == {"512^3", "1024^3"}
    assert [r.shape for r in rows if r.includes == DEVICE] == ["2048^3", "2048^3"]
