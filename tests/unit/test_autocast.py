"""``--autocast``: the CPU's bf16 support read from cpuinfo flags, what ``auto`` picks from them, and the policy's
forward under autocast with its weights left float32."""

from __future__ import annotations

import copy

import pytest
import torch

from posttrain.config import ConfigError
from posttrain.models.autocast import autocast_dtype, autocast_forward, cpu_flags, cpu_has_native_bf16

EPYC_WITHOUT_BF16 = frozenset({"fpu", "sse4_2", "avx", "avx2", "fma"})
SAPPHIRE_RAPIDS = EPYC_WITHOUT_BF16 | {"avx512f", "avx512_bf16", "amx_tile", "amx_bf16"}
ZEN4 = EPYC_WITHOUT_BF16 | {"avx512f", "avx512_bf16"}


def test_cpu_flags_read_the_first_processors_flags_line(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx2 avx512_bf16\n\n"
                       "processor\t: 1\nflags\t\t: fpu\n")
    assert cpu_flags(cpuinfo) == {"fpu", "avx2", "avx512_bf16"}
    assert cpu_flags(tmp_path / "missing") == frozenset()
    (tmp_path / "noflags").write_text("processor\t: 0\n")
    assert cpu_flags(tmp_path / "noflags") == frozenset()


@pytest.mark.parametrize(("flags", "native"), [(EPYC_WITHOUT_BF16, False), (SAPPHIRE_RAPIDS, True), (ZEN4, True),
                                               (frozenset({"amx_bf16"}), True), (frozenset(), False)])
def test_native_bf16_needs_amx_bf16_or_avx512_bf16(flags, native):
    assert cpu_has_native_bf16(flags) is native


@pytest.mark.parametrize(("setting", "precision", "device", "flags", "expected"), [
    ("auto", "fp32", "cpu", EPYC_WITHOUT_BF16, None),  # emulated bf16 (100x slower matmul here): off
    ("auto", "fp32", "cpu", SAPPHIRE_RAPIDS, torch.bfloat16),
    ("auto", "fp32", "cpu", ZEN4, torch.bfloat16),
    ("auto", "fp32", "cuda", SAPPHIRE_RAPIDS, None),  # auto decides for CPUs only
    ("auto", "bf16", "cpu", SAPPHIRE_RAPIDS, None),  # bf16 weights need no autocast
    ("bf16", "fp32", "cpu", EPYC_WITHOUT_BF16, torch.bfloat16),  # asked for: on even where slow
    ("bf16", "fp32", "cuda", frozenset(), torch.bfloat16),
    ("off", "fp32", "cpu", SAPPHIRE_RAPIDS, None),
])
def test_autocast_setting_resolves_per_cpu(setting, precision, device, flags, expected):
    assert autocast_dtype(setting, precision, device, flags) is expected


def test_an_unknown_setting_is_refused():
    with pytest.raises(ValueError, match="autocast"):
        autocast_dtype("fp16", "fp32", "cpu", frozenset())
    from posttrain.algos.pg import GRPOConfig

    with pytest.raises(ConfigError, match="autocast"):
        GRPOConfig(autocast="fp16").validate()


def test_forward_runs_in_bf16_with_fp32_weights_and_copies_keep_their_own_weights():
    torch.manual_seed(0)
    model = autocast_forward(torch.nn.Linear(4, 3), "cpu", torch.bfloat16)
    x = torch.randn(2, 4)
    out = model(x)
    assert out.dtype == torch.bfloat16 and model.weight.dtype == torch.float32
    out.float().sum().backward()
    assert model.weight.grad.dtype == torch.float32
    twin = copy.deepcopy(model)
    with torch.no_grad():
        twin.weight.zero_()
        twin.bias.zero_()
    assert twin(x).dtype == torch.bfloat16
    assert (twin(x) == 0).all() and (model(x) != 0).any()
