"""Who may reach ``posttrain serve``: the API key from the environment or a file, never a flag, and no
non-loopback bind without one (``rewards.server.access``, ``rewards.server.cli``)."""

from __future__ import annotations

import pytest

from rewards.server import cli
from rewards.server.access import API_KEY_ENV, RETIRED_API_KEY_ENV, bind_problem, read_api_key


@pytest.fixture()
def uvicorn_runs(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """``uvicorn.run`` replaced by a recorder: what ``serve_main`` would have served, without serving it."""
    import uvicorn

    calls: list[dict] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: calls.append({"app": app, **kwargs}))
    for name in (API_KEY_ENV, RETIRED_API_KEY_ENV):
        monkeypatch.delenv(name, raising=False)
    return calls


def test_the_key_comes_from_the_environment_or_a_file(tmp_path) -> None:
    assert read_api_key(None, {}) is None
    assert read_api_key(None, {API_KEY_ENV: "k1"}) == "k1"
    key_file = tmp_path / "key"
    key_file.write_text("  k2\n")
    assert read_api_key(str(key_file), {}) == "k2"
    with pytest.raises(ValueError, match="both"):
        read_api_key(str(key_file), {API_KEY_ENV: "k1"})
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ValueError, match="--api_key_file .*empty"):
        read_api_key(str(tmp_path / "empty"), {})
    with pytest.raises(ValueError, match="--api_key_file .*cannot read"):
        read_api_key(str(tmp_path / "missing"), {})
    with pytest.raises(ValueError, match=f"{RETIRED_API_KEY_ENV} is no longer read.*{API_KEY_ENV}"):
        read_api_key(None, {RETIRED_API_KEY_ENV: "old"})


@pytest.mark.parametrize("host", ["127.0.0.1", "127.1.2.3", "::1", "localhost"])
def test_loopback_needs_no_key(host: str) -> None:
    assert bind_problem(host, None) is None


@pytest.mark.parametrize("host", ["0.0.0.0", "10.0.0.5", "::", "judge.internal"])
def test_other_hosts_need_a_key(host: str) -> None:
    assert bind_problem(host, "k") is None
    problem = bind_problem(host, None)
    assert problem and f"--host {host}" in problem and API_KEY_ENV in problem and "--api_key_file" in problem


def test_serve_refuses_an_open_non_loopback_bind(uvicorn_runs, capsys) -> None:
    assert cli.serve_main(["--backend", "fake", "--host", "0.0.0.0"]) == 2
    assert not uvicorn_runs
    err = capsys.readouterr().err
    assert "--host 0.0.0.0 is not a loopback address" in err and API_KEY_ENV in err


def test_serve_binds_anywhere_with_a_key_from_a_file(uvicorn_runs, tmp_path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("secret-key\n")
    assert cli.serve_main(["--backend", "fake", "--host", "0.0.0.0", "--api_key_file", str(key_file),
                           "--max_connections", "7", "--keep_alive_timeout", "3"]) == 0
    (run,) = uvicorn_runs
    assert run["host"] == "0.0.0.0" and run["limit_concurrency"] == 7 and run["timeout_keep_alive"] == 3
    assert run["app"].state.server.settings.api_key == "secret-key"


def test_serve_reads_the_key_from_the_environment(uvicorn_runs, monkeypatch) -> None:
    monkeypatch.setenv(API_KEY_ENV, "env-key")
    assert cli.serve_main(["--backend", "fake", "--host", "10.1.2.3", "--body_timeout", "4"]) == 0
    settings = uvicorn_runs[0]["app"].state.server.settings
    assert settings.api_key == "env-key" and settings.body_timeout_s == 4


@pytest.mark.parametrize("flag", ["--api_key", "--api-key"])
def test_a_key_on_the_command_line_is_refused(uvicorn_runs, capsys, flag: str) -> None:
    """A key on the command line would be in ``ps`` for every user (nor may ``--api_key`` pass as an
    abbreviation of ``--api_key_file``, which would print the key as a missing file's name)."""
    assert cli.serve_main(["--backend", "fake", flag, "visible-key"]) == 2
    err = capsys.readouterr().err
    assert "visible to every user in ps" in err and API_KEY_ENV in err and "visible-key" not in err
    assert not uvicorn_runs
    help_text = cli.build_parser().format_help()
    assert "--api_key_file" in help_text and API_KEY_ENV in help_text and "--api-key" not in help_text


@pytest.mark.parametrize("flag", ["--body_timeout", "--keep_alive_timeout", "--max_connections"])
def test_limits_must_be_positive(uvicorn_runs, capsys, flag: str) -> None:
    assert cli.serve_main(["--backend", "fake", flag, "0"]) == 2
    assert flag in capsys.readouterr().err and not uvicorn_runs
