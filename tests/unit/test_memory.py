"""Fixed glibc malloc thresholds (posttrain.common.memory): set in-process, handed to child processes."""

from __future__ import annotations

import ctypes.util
import platform

import pytest

from posttrain.common.memory import MALLOC_ENV, MMAP_THRESHOLD_BYTES, fix_malloc_thresholds
from posttrain.engines.worker import worker_environment


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_thresholds_are_set_on_glibc_and_setting_them_again_is_harmless() -> None:
    assert ctypes.util.find_library("c") is not None
    assert fix_malloc_thresholds() is True
    assert fix_malloc_thresholds() is True


def test_a_rollout_worker_gets_the_thresholds_unless_the_user_set_them() -> None:
    env = worker_environment(base={}, cuda=False)
    assert env["MALLOC_MMAP_THRESHOLD_"] == str(MMAP_THRESHOLD_BYTES) == "1048576"
    assert env["MALLOC_TRIM_THRESHOLD_"] == "0"
    mine = worker_environment(base={"MALLOC_MMAP_THRESHOLD_": "65536"}, cuda=False)
    assert mine["MALLOC_MMAP_THRESHOLD_"] == "65536" and set(MALLOC_ENV) <= set(mine)
