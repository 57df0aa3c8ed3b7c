"""Credentials in the spec's tracker URLs: never written, resolved only in the process that uses them.

A tracker URL may carry a password (``postgresql://user:PASSWORD@db/optuna``). The spec is
written into the experiment folder (``hpsearch_spec.yaml``), shown in the reports, put into a
RayJob's ConfigMap and pickled by Tune with its callbacks (``tuner.pkl``), all files made to be
kept and shared. So:

- A URL may name environment variables instead: ``postgresql://user:${OPTUNA_DB_PASSWORD}@db/optuna``.
  The spec and every file keep the reference; the tracker expands it when it opens the store, in the
  search process (:func:`resolve_url`). Nothing secret is written anywhere.
- A password written into the URL itself is used by the search that was given it, and written
  nowhere: every copy says ``user:***@`` (:func:`redact_url`, :func:`redact_tree`). A ``resume``
  runs in a new process that never saw it, so it reads it from the variable :data:`PASSWORD_VARIABLES`
  names for the field (``HPSEARCH_OPTUNA_PASSWORD``), and refuses to start, in one line, without it.

The database's or the server's own ways stay open too: ``PGPASSWORD`` or ``~/.pgpass`` for
PostgreSQL, ``MLFLOW_TRACKING_USERNAME``/``MLFLOW_TRACKING_PASSWORD`` for an MLflow server.
Pure: no I/O beyond the environment mapping it is given.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from hpsearch.errors import Problem

__all__ = [
    "REDACTED",
    "URL_FIELDS",
    "PASSWORD_VARIABLES",
    "redact_url",
    "redact_text",
    "redact_tree",
    "has_password",
    "variables",
    "resolve_url",
    "url_problems",
]

#: What a password reads as wherever it would have been written.
REDACTED = "***"
#: The spec's fields that hold a tracker URL, as dotted YAML paths.
URL_FIELDS: tuple[str, ...] = ("tracking.optuna", "tracking.mlflow.tracking_uri")
#: Per URL field, the environment variable a ``resume`` reads a redacted password from.
PASSWORD_VARIABLES: dict[str, str] = {
    "tracking.optuna": "HPSEARCH_OPTUNA_PASSWORD",
    "tracking.mlflow.tracking_uri": "HPSEARCH_MLFLOW_PASSWORD",
}
#: Query parameters that carry a secret in a database or server URL (``?password=``, ``?token=``).
SECRET_QUERY_KEYS = frozenset({"password", "passwd", "pwd", "token", "access_token", "secret", "api_key", "apikey"})

_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: ``scheme://user:password@``: the password, anywhere in a text (a URL in a message, a spec file's lines).
_USERINFO = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@'\"]*:)(?P<password>[^\s@'\"]+)(?P<at>@)")


def _is_reference(text: str) -> bool:
    return _REFERENCE.fullmatch(text) is not None


def has_password(url: str) -> bool:
    """Whether ``url`` carries a secret written into it: a password or a secret query parameter
    (``${VAR}`` references and an already redacted ``***`` are not secrets)."""
    return redact_url(url) != url


def redact_url(url: str) -> str:
    """``url`` with its password and secret query parameters as ``***``; references ``${VAR}`` kept."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact_text(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user, colon, password = userinfo.partition(":")
        if colon and password and password != REDACTED and not _is_reference(password):
            netloc = f"{user}:{REDACTED}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(k.lower() in SECRET_QUERY_KEYS and v and v != REDACTED and not _is_reference(v) for k, v in pairs):
            query = urlencode(
                [
                    (k, REDACTED if k.lower() in SECRET_QUERY_KEYS and v and not _is_reference(v) else v)
                    for k, v in pairs
                ],
                safe="*${}",
            )
    if netloc == parts.netloc and query == parts.query:
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_text(text: str) -> str:
    """Every ``scheme://user:password@`` in ``text`` (a message, a file's lines) with the password as ``***``."""
    return _USERINFO.sub(
        lambda m: m.group(0) if _is_reference(m["password"]) else f"{m['head']}{REDACTED}{m['at']}", text
    )


def redact_tree(value: Any) -> Any:
    """A copy of a spec (dicts, lists, strings) with every URL's password as ``***``: what is written."""
    if isinstance(value, Mapping):
        return {k: redact_tree(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_tree(v) for v in value]
    if isinstance(value, str) and "://" in value:
        return redact_text(redact_url(value))
    return value


def variables(url: str) -> list[str]:
    """The environment variables ``url`` names as ``${VAR}``, in order, each once."""
    return list(dict.fromkeys(_REFERENCE.findall(url)))


def resolve_url(field: str, url: str, environ: Mapping[str, str]) -> str:
    """The URL to open: ``${VAR}`` expanded and a redacted password read back from the environment.

    Called by the tracker in the process that opens the store, never before a file is written.

    Raises:
        KeyError: A variable it needs is not set; the message is :func:`url_problems`' line.
    """
    problems = url_problems(field, url, environ)
    if problems:
        raise KeyError(problems[0].message)
    resolved = _REFERENCE.sub(lambda m: environ[m.group(1)], url)
    if f":{REDACTED}@" in resolved:
        password = environ[PASSWORD_VARIABLES[field]]
        head, _, tail = resolved.partition(f":{REDACTED}@")
        resolved = f"{head}:{password}@{tail}"
    return resolved


def url_problems(field: str, url: str, environ: Mapping[str, str]) -> list[Problem]:
    """What ``url`` needs from the environment and does not find there, one problem per variable."""
    problems = [
        Problem(field, f"names ${{{name}}}, which is not set in this environment: export {name} and run again")
        for name in variables(url)
        if name not in environ
    ]
    if f":{REDACTED}@" in url and PASSWORD_VARIABLES[field] not in environ:
        variable = PASSWORD_VARIABLES[field]
        problems.append(
            Problem(
                field,
                f"is {url!r}: its password was not written to the experiment folder, so this process needs it: "
                f"export {variable}=<the password> and run again (or name a variable in the URL, "
                f"user:${{MY_VAR}}@, in the spec)",
            )
        )
    return problems
