"""The bottom layer: small helpers every other package uses and that import nothing of the project.

``jsonl`` (the strict JSONL reader), ``files`` (atomic writes), ``padding`` (left padding), ``http`` (the HTTP
retry loop), ``registry`` (name -> object tables), ``typed_values`` (string -> annotated type), ``cli_help``
(the subcommands' help style and JSON summary).
"""
