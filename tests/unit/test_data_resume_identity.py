"""Content-addressed resume and the failure policy of the data backbone: a stage or a whole-dataset step is
reused only for the same input content, flags and models (else refused, naming what changed, or redone with
``overwrite``); an exception is retried and then fails the run naming its cause (a rerun retries the block),
while only records the stage refuses are rejects."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from data_pipelines.common.runner import Reject, StageFailed, StageRunner, StaleOutput, run_once
from tests.unit.ray_session import ray_session_fixture  # noqa: F401 - the `ray_session` fixture

pytestmark = pytest.mark.heavy  # starts Ray


def _double(batch: list[dict]) -> list[dict | Reject]:
    return [Reject("negative") if r["x"] < 0 else {"y": 2 * r["x"]} for r in batch]


def _runner(out: Path, process=_double, **kwargs) -> StageRunner:
    return StageRunner(out, process, chunk_size=2, progress=False, retry_backoff_s=0, **kwargs)


def test_a_changed_flag_or_model_is_refused_by_name_and_redone_with_overwrite(tmp_path, ray_session):
    records = [{"x": i} for i in range(5)]
    config = {"tasks": ["task1"], "models": {"model": {"path": "/m", "sha256": "aaa"}}}
    _runner(tmp_path, config=config).run(records)
    retrained = {**config, "models": {"model": {"path": "/m", "sha256": "bbb"}}}
    with pytest.raises(StaleOutput, match=r"config.models.model.sha256: 'aaa' -> 'bbb'"):
        _runner(tmp_path, config=retrained).run(records)
    with pytest.raises(StaleOutput, match=r"config.tasks: \['task1'\] -> \['task2'\]"):
        _runner(tmp_path, config={**config, "tasks": ["task2"]}).run(records)
    redone = _runner(tmp_path, config=retrained, overwrite=True).run(records)
    assert redone.chunks_run == 3 and redone.chunks_done_before == 0
    assert json.loads((tmp_path / "run.json").read_text())["config"] == retrained


def test_changed_input_content_of_the_same_length_is_refused_per_block(tmp_path, ray_session):
    """The in-memory input is not "memory" any more: block 1's records changed, blocks 0 and 2 did not."""
    _runner(tmp_path).run([{"x": i} for i in range(6)])
    changed = [{"x": i} for i in range(6)]
    changed[3] = {"x": 30}
    with pytest.raises(StaleOutput, match=r"block 1 \(input records 2\.\.\): the input records differ"):
        _runner(tmp_path).run(changed)
    summary = _runner(tmp_path, overwrite=True).run(changed)
    assert (summary.chunks_done_before, summary.chunks_run) == (2, 1)  # only the changed block is redone
    assert [o["y"] for o in _runner(tmp_path).iter_outputs()] == [0, 2, 4, 60, 8, 10]
    with pytest.raises(StaleOutput, match="num_records: 6 -> 5"):
        _runner(tmp_path).run(changed[:5])


def test_run_once_covers_its_inputs_and_flags(tmp_path):
    """DESIGNER's ``8-filtered.jsonl`` with ``--decontaminate`` added: refused, then redone on request."""
    path = tmp_path / "8-filtered.jsonl"
    generated = [{"q": "a"}, {"q": "b"}]
    assert run_once(path, lambda: generated[:1], config={"decontaminate": None}, inputs=generated) == generated[:1]
    with pytest.raises(StaleOutput, match="config.decontaminate: None -> 'bench.jsonl'"):
        run_once(path, list, config={"decontaminate": "bench.jsonl"}, inputs=generated)
    with pytest.raises(StaleOutput, match="inputs_sha256"):
        run_once(path, list, config={"decontaminate": None}, inputs=generated[:1])
    assert run_once(path, list, config={"decontaminate": "bench.jsonl"}, inputs=generated,
                    overwrite=True) == []
    assert run_once(path, lambda: generated, config={"decontaminate": "bench.jsonl"}, inputs=generated) == []


class _FailsFirst:
    """A stage that raises its first ``n`` calls in a worker process (counted in a file), then works."""

    def __init__(self, counter: Path, n: int) -> None:
        self.counter, self.n = counter, n

    def __call__(self, batch: list[dict]) -> list[dict | Reject]:
        calls = int(self.counter.read_text() or 0) if self.counter.exists() else 0
        self.counter.write_text(str(calls + 1))
        if calls < self.n:
            raise ConnectionError(f"engine down (call {calls + 1})")
        return _double(batch)


def test_an_exception_is_retried_then_fails_the_run_and_a_rerun_retries_the_block(tmp_path, ray_session):
    records = [{"x": i} for i in range(2)] + [{"x": -1}]
    flaky = _FailsFirst(tmp_path / "calls", 2)  # one block at a time: two failed calls, then it works
    summary = _runner(tmp_path / "flaky", flaky, retries=2).run(records)
    assert (summary.records_out, summary.records_rejected) == (2, 1)  # no record lost; the refused one kept
    down = _FailsFirst(tmp_path / "calls-down", 10**6)
    with pytest.raises(StageFailed, match=r"block 0 failed after 2 attempts: ConnectionError: engine down"):
        _runner(tmp_path / "down", down, retries=1).run(records[:2])
    assert not list((tmp_path / "down").glob("part-*"))  # nothing marked done, no records rejected
    assert _runner(tmp_path / "down").run(records[:2]).records_out == 2  # the rerun retries it


class _DownThenUp(BaseHTTPRequestHandler):
    """An OpenAI-compatible /v1/completions that answers 503 to its first ``down`` requests."""

    down = 3
    seen = 0

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen += 1
        if type(self).seen <= self.down:
            self.send_response(503)
            self.end_headers()
            return
        answer = {"choices": [{"text": "ok", "token_ids": [len(body["prompt"])], "finish_reason": "length",
                               "logprobs": {"token_logprobs": [-0.5]}}]}
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


class _HTTPStage:
    """Generates one completion per record through the project's HTTP engine (no retries of its own)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def __call__(self, batch: list[dict]) -> list[dict]:
        from posttrain.engines.base import SamplingParams
        from posttrain.engines.http import OpenAIHTTPEngine

        engine = OpenAIHTTPEngine(self.url, tokenizer=object(), max_retries=0, timeout_s=10)
        rollouts = engine.generate([[1] * (r["x"] + 1) for r in batch], SamplingParams(max_new_tokens=1))
        return [{"completion": ids} for ids in rollouts.completion_ids]


def test_a_stage_against_an_http_engine_down_then_up_loses_no_record(tmp_path, ray_session):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _DownThenUp)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        runner = _runner(tmp_path, _HTTPStage(url), retries=3)
        summary = runner.run([{"x": i} for i in range(4)])
    finally:
        server.shutdown()
    assert (summary.records_out, summary.records_rejected) == (4, 0)
    assert [o["completion"] for o in runner.iter_outputs()] == [[1], [2], [3], [4]]


def test_a_checkpoint_retrained_at_the_same_path_is_another_model(tmp_path):
    """Sci2Pol's result cache and every stage config name a model by its path and the hash of its files."""
    from data_pipelines.common.backends import model_identity
    from data_pipelines.sci2pol.run import _cache_name

    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"\x00" * 64)
    before = model_identity(str(tmp_path))
    (tmp_path / "model.safetensors").write_bytes(b"\x01" * 64)  # retrained: same path, same size
    after = model_identity(str(tmp_path))
    assert before["path"] == after["path"] == str(tmp_path) and before["sha256"] != after["sha256"]
    assert _cache_name(before) != _cache_name(after)
    assert model_identity("http://127.0.0.1:9/v1#m") == {"spec": "http://127.0.0.1:9/v1#m", "kind": "http",
                                                         "url": "http://127.0.0.1:9/v1", "model": "m"}
