"""A tracker URL's password in a RayJob: taken from a Kubernetes Secret, never written into the manifest.

The manifest is a file people keep, commit and share, and its ConfigMap holds the spec's text. A
password written into a tracker URL (``postgresql://user:PASSWORD@db/optuna``) is replaced there by a
reference, ``user:${HPSEARCH_OPTUNA_PASSWORD}@``, which the search expands in its own process
(:mod:`hpsearch.spec.credentials`); a variable the URL already names stays as it is. Each such
variable is set in the head pod, where KubeRay runs the search, from the Secret ``<job>-credentials``
(``secretKeyRef``), which the manifest's header says how to create.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from hpsearch.errors import PlanError
from hpsearch.spec import Spec
from hpsearch.spec.credentials import PASSWORD_VARIABLES, REDACTED, variables

__all__ = ["Credentials", "credentials_for", "secret_name"]


def secret_name(job: str) -> str:
    """The Kubernetes Secret the job's head pod reads credentials from."""
    return f"{job}-credentials"


@dataclass(frozen=True)
class Credentials:
    """What a spec's tracker URLs need in the head pod.

    Attributes:
        files: The ConfigMap's files, each literal password replaced by its variable's reference.
        overrides: The ``--set`` overrides, the same way.
        variables: The environment variables the head pod takes from the Secret, in order.
        literal: Those that replace a password written in the spec (the rest the spec named itself).
    """

    files: dict[str, str]
    overrides: list[str]
    variables: list[str] = field(default_factory=list)
    literal: list[str] = field(default_factory=list)

    def env(self, job: str) -> list[dict[str, Any]]:
        """The head container's ``env``: each variable from the job's Secret."""
        return [
            {"name": name, "valueFrom": {"secretKeyRef": {"name": secret_name(job), "key": name}}}
            for name in self.variables
        ]


def _url_fields(spec: Spec) -> dict[str, str]:
    tracking = spec.tracking
    urls = {
        "tracking.optuna": tracking.optuna,
        "tracking.mlflow.tracking_uri": tracking.mlflow and tracking.mlflow.tracking_uri,
    }
    return {key: url for key, url in urls.items() if url}


def _password(url: str) -> str | None:
    """The password written into ``url``, or ``None`` (none, a ``${VAR}`` reference, or already ``***``)."""
    try:
        userinfo = urlsplit(url).netloc.rpartition("@")[0]
    except ValueError:
        return None
    password = userinfo.partition(":")[2]
    if not password or password == REDACTED or (password.startswith("${") and password.endswith("}")):
        return None
    return password


def credentials_for(spec: Spec, files: Mapping[str, str], spec_file: str, overrides: Sequence[str]) -> Credentials:
    """The spec's credentials moved out of the manifest's text and into the head pod's Secret.

    Raises:
        PlanError: A password the spec's text does not hold verbatim (written in another form), which
            cannot be moved: the message says to name a variable in the URL instead.
    """
    texts = dict(files)
    sets = list(overrides)
    names: list[str] = []
    literal: list[str] = []
    for key, url in _url_fields(spec).items():
        password = _password(url)
        if password is not None:
            variable = PASSWORD_VARIABLES[key]
            written, reference = f":{password}@", f":${{{variable}}}@"
            found = written in texts[spec_file] or any(written in o for o in sets)
            if not found:
                raise PlanError(
                    f"{key} holds a password the RayJob would write into its ConfigMap, and it is not written "
                    f"as user:PASSWORD@ in the spec: write it as user:${{{variable}}}@ and create the Secret the "
                    "manifest then names"
                )
            texts[spec_file] = texts[spec_file].replace(written, reference)
            sets = [o.replace(written, reference) for o in sets]
            literal.append(variable)
            names.append(variable)
        names += variables(url)
    return Credentials(texts, sets, list(dict.fromkeys(names)), literal)
