"""``actor_gpus``: which pipeline actors reserve a GPU (pure: no Ray, no GPU needed)."""

from __future__ import annotations

from data_pipelines.common.resources import actor_gpus, is_cuda_device, loads_local_model


def test_a_local_model_on_cuda_reserves_one_gpu_per_actor() -> None:
    assert actor_gpus(["smollm2-135m"], "cuda") == 1
    assert actor_gpus(["vllm:/models/x"], "cuda:0") == 1
    assert actor_gpus([None], "cuda") == 1  # the embedded default model loads on the device too
    assert actor_gpus(["http://127.0.0.1:8000/v1#m", "smollm2-135m"], "cuda") == 1  # one GPU, shared


def test_cpu_and_remote_engines_reserve_none() -> None:
    assert actor_gpus(["smollm2-135m"], "cpu") == 0
    assert actor_gpus(["http://127.0.0.1:8000/v1#m"], "cuda") == 0
    assert actor_gpus(["vllm-remote:http://10.0.0.1:8000"], "cuda") == 0
    assert actor_gpus(["cachelm"], "cuda") == 0
    assert actor_gpus([object()], "cuda") == 0  # an engine built in this process already holds its device
    assert actor_gpus([], "cuda") == 0


def test_device_names() -> None:
    assert is_cuda_device("cuda") and is_cuda_device("cuda:1")
    assert not is_cuda_device("cpu") and not is_cuda_device("cudax")
    assert loads_local_model("tiny") and not loads_local_model("fake")
