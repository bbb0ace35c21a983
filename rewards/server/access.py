"""Who may reach ``posttrain serve``: its API key, read from the environment or a file, and the bind rule.

The key is never taken from the command line, which ``ps`` shows to every user of the machine:
``POSTTRAIN_REWARD_API_KEY`` holds it (the variable the client, ``rewards.remote``, sends it from), or
``--api_key_file`` names a file holding it (surrounding whitespace stripped). A server without a key binds
loopback only (127.0.0.0/8, ``::1``, ``localhost``; ``posttrain.engines.worker_auth.is_loopback``, the rollout
worker's rule): any other ``--host`` is refused (``bind_problem``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from posttrain.common.secrets_file import read_secret_file
from posttrain.engines.worker_auth import is_loopback

API_KEY_ENV = "POSTTRAIN_REWARD_API_KEY"
RETIRED_API_KEY_ENV = "POSTTRAIN_API_KEY"
"""The variable ``posttrain serve`` once read its key from; set alone, it is an error rather than ignored, so a
server its user believes keyed never starts open."""


def read_api_key(key_file: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The bearer key from the file ``key_file`` or from ``API_KEY_ENV``; None when neither is set. Raises
    ``ValueError`` naming the source for an unreadable or empty file, both sources at once, or only the retired
    variable set."""
    env = os.environ if environ is None else environ
    from_env = env.get(API_KEY_ENV) or None
    if key_file is None:
        if from_env is None and env.get(RETIRED_API_KEY_ENV):
            raise ValueError(f"${RETIRED_API_KEY_ENV} is no longer read: put the key in ${API_KEY_ENV} (the "
                             "variable the client reads too) or in a file named by --api_key_file")
        return from_env
    if from_env is not None:
        raise ValueError(f"both ${API_KEY_ENV} and --api_key_file are set: give the key one way")
    return read_secret_file(key_file, f"--api_key_file {key_file}")


def bind_problem(host: str, api_key: str | None) -> str | None:
    """Why the server must not bind ``host`` (a non-loopback address without a key), or None when it may."""
    if api_key or is_loopback(host):
        return None
    return (f"--host {host} is not a loopback address and no API key is set: anyone who can reach the port could "
            f"use the model. Set ${API_KEY_ENV} (or --api_key_file naming a file holding the key), and the "
            "same key in the clients' environment, or bind 127.0.0.1")
