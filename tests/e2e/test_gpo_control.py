"""Short end-to-end runs of GPO's control setting through ``gpo_control_main`` (posttrain gpo-control)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from posttrain.standalone.gpo_control.cli import gpo_control_main
from posttrain.standalone.gpo_control.envs import make_env
from posttrain.standalone.gpo_control.methods import METHODS, ControlConfig, train


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def test_help_exits_cleanly(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        gpo_control_main(["--help"])
    assert e.value.code == 0
    assert "--method" in capsys.readouterr().out


def test_envs_split_state_and_observation() -> None:
    env = make_env("cartpole", 3, noise=0.0, seed=0)
    state, obs = env.reset()
    assert state.shape == (3, 4) and obs.shape == (3, 4)  # [x, theta] x 2 stacked frames
    np.testing.assert_allclose(obs[:, 2:], state[:, [0, 2]], rtol=1e-6)  # noise 0: newest frame = positions
    res = env.step(np.ones(3, dtype=np.int64))
    np.testing.assert_allclose(res.obs[:, :2], obs[:, 2:])  # the previous frame shifted in
    tiger = make_env("tiger-door", 4, noise=0.0, seed=0)
    state, obs = tiger.reset()
    assert (obs.argmax(1) == 0).all()  # nothing heard yet
    res = tiger.step(np.zeros(4, dtype=np.int64))  # listen
    assert (res.obs.argmax(1) - 1 == state.argmax(1)).all() and np.allclose(res.reward, -0.1)
    res = tiger.step(2 - state.argmax(1))  # open the tiger-free door: +1 and the episode restarts
    assert np.allclose(res.reward, 1.0) and res.terminated.all() and np.allclose(res.episode_returns, 0.9)


@pytest.mark.parametrize("method", METHODS)
def test_every_method_runs_on_tiger_door(method: str, tmp_path) -> None:
    out = tmp_path / method
    rc = gpo_control_main(["--env", "tiger-door", "--method", method, "--steps", "512", "--num_evals", "2",
                           "--out", str(out), "--no_progress"])
    assert rc == 0
    result = json.loads((out / "result.json").read_text())
    assert len(result["history"]) == 2 and np.isfinite(result["final_return"])
    assert (out / "model.pt").exists()


def test_gpo_learns_listen_then_open_and_teacher_student_does_not() -> None:
    gpo, _ = train(ControlConfig(env="tiger-door", method="gpo-clip", steps=2048, num_evals=2))
    assert gpo["final_return"] == pytest.approx(0.9)
    assert gpo["first_action_probs"][0][0] > 0.8  # the learner listens first
    oracle, teacher = train(ControlConfig(env="tiger-door", method="oracle", steps=2048, num_evals=1))
    assert oracle["final_return"] == pytest.approx(1.0)  # the full-state teacher opens at once
    ts, _ = train(ControlConfig(env="tiger-door", method="teacher-student", steps=1024, num_evals=1), teacher=teacher)
    assert ts["first_action_probs"][0][0] < 0.2  # the student copies "open" and never learns to listen
    assert ts["final_return"] < 0.5


def test_seeded_runs_repeat() -> None:
    cfg = ControlConfig(env="cartpole", method="gpo-penalty", steps=512, num_envs=4, rollout_len=64, num_evals=1)
    a, b = train(cfg)[0], train(cfg)[0]
    assert a["history"] == b["history"]


def test_continuous_pendulum_and_teacher_file(tmp_path) -> None:
    oracle = tmp_path / "oracle"
    assert gpo_control_main(["--env", "pendulum", "--method", "oracle", "--steps", "800", "--num_envs", "2",
                             "--num_evals", "1", "--eval_episodes", "2", "--out", str(oracle), "--no_progress"]) == 0
    assert gpo_control_main(["--env", "pendulum", "--method", "teacher-student", "--steps", "800", "--num_envs", "2",
                             "--num_evals", "1", "--eval_episodes", "2", "--teacher", str(oracle / "model.pt"),
                             "--no_progress"]) == 0
    r, _ = train(ControlConfig(env="pendulum", method="gpo-clip", noise=0.1, steps=800, num_envs=2, num_evals=1,
                               eval_episodes=2))
    assert np.isfinite(r["history"][-1]["kl_guider_learner"])


def test_bad_values_fail_with_the_field() -> None:
    with pytest.raises(SystemExit):
        gpo_control_main(["--env", "cartpole", "--steps", "10"])
    with pytest.raises(ValueError, match="minibatches"):
        ControlConfig(env="cartpole", minibatches=3).resolved()
