"""Reading a secret (an API key, a shared secret) from a file, the way every server and client here takes one
that must not appear on a command line."""

from __future__ import annotations


def read_secret_file(path: str, what: str) -> str:
    """The secret in the file ``path``, surrounding whitespace stripped. Raises ``ValueError`` starting with
    ``what`` (how the user named the file, e.g. ``--api_key_file PATH``) for an unreadable or an empty file; the
    message never holds the secret."""
    try:
        with open(path) as handle:
            secret = handle.read().strip()
    except OSError as err:
        raise ValueError(f"{what}: cannot read the secret: {err.strerror}") from err
    if not secret:
        raise ValueError(f"{what}: the file is empty")
    return secret
