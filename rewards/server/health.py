"""The reward server's health and admin routes: ``GET /health`` (never needs the token), ``GET /metrics``
(Prometheus text, or ``?format=json``) and ``GET /v1/models`` (OpenAI's model list)."""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse

from rewards.server.guard import APIError
from rewards.server.state import State

router = APIRouter()


@router.get("/health")
async def health(state: State) -> dict:
    batcher, settings = state.batcher, state.settings
    return {"status": "ok", "model": state.model_name, "backend": state.served.backend, "queued": batcher.queued,
            "busy": batcher.busy, "max_queue": settings.max_queue, "max_batch_size": batcher.max_batch_size}


@router.get("/metrics", response_model=None)
async def metrics_endpoint(state: State, format: str = "prometheus") -> Any:
    batcher, metrics = state.batcher, state.metrics
    stats = batcher.stats
    if format == "json":
        return {"requests": [{"path": p, "status": s, "count": c} for (p, s), c in sorted(metrics.requests.items())],
                "latency": {p: {"sum_s": v[0], "count": v[1]} for p, v in metrics.latency.items()},
                "batcher": {**asdict(stats), "queued": batcher.queued}, "uptime_s": time.time() - metrics.started}
    if format != "prometheus":
        raise APIError(400, f"format must be 'prometheus' or 'json', got {format!r}")
    lines = ["# TYPE posttrain_requests_total counter"]
    for (p, s), c in sorted(metrics.requests.items()):
        lines.append(f'posttrain_requests_total{{path="{p}",status="{s}"}} {c}')
    lines.append("# TYPE posttrain_request_seconds summary")
    for p, (total, count) in sorted(metrics.latency.items()):
        lines.append(f'posttrain_request_seconds_sum{{path="{p}"}} {total:.6f}')
        lines.append(f'posttrain_request_seconds_count{{path="{p}"}} {count}')
    lines += [
        f"posttrain_queue_depth {batcher.queued}",
        f"posttrain_batches_total {stats.batches}",
        f"posttrain_batched_prompts_total {stats.prompts}",
        f"posttrain_batch_size_max {stats.max_batch}",
        f"posttrain_generate_seconds_total {stats.generate_seconds:.6f}",
        f"posttrain_completion_tokens_total {stats.completion_tokens}",
        f"posttrain_queue_rejections_total {stats.rejected_full}",
        f"posttrain_cancelled_prompts_total {stats.dropped_cancelled}",
        f"posttrain_generate_failures_total {stats.failures}",
    ]
    return PlainTextResponse("\n".join(lines) + "\n", media_type="text/plain; version=0.0.4")


@router.get("/v1/models")
async def models(state: State) -> dict:
    return {"object": "list", "data": [{"id": state.model_name, "object": "model",
                                        "created": int(state.metrics.started), "owned_by": "posttrain"}]}
