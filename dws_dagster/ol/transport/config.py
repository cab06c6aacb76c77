"""The OpenLineage config file for a workspace, found where the client would look for it (with
the workspace root's before the home folder's), and read so that a broken one is refused
rather than logged and ignored, as the client would.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import yaml

from dws_dagster.errors import TransportConfigError
from dws_dagster.ol.transport.text import error_text

if TYPE_CHECKING:
    from dws_dagster.workspace.definition import Workspace

CONFIG_FILE_NAME = "openlineage.yml"


def config_file(workspace: Workspace) -> str | None:
    """The OpenLineage config file for `workspace`: the client's documented search order
    (`OPENLINEAGE_CONFIG`, the current folder, `~/.openlineage/`) with the workspace root's
    file before the home folder's."""
    explicit = os.environ.get("OPENLINEAGE_CONFIG")
    if explicit and not os.path.isfile(explicit):
        raise TransportConfigError(
            f"OPENLINEAGE_CONFIG names {explicit}, which is not a readable file; fix the "
            "variable or unset it"
        )
    home = os.path.join(os.path.expanduser("~/.openlineage"), CONFIG_FILE_NAME)
    found = next(
        (
            path
            for path in (explicit, os.path.join(os.getcwd(), CONFIG_FILE_NAME), home)
            if path and _readable(path)
        ),
        None,
    )
    ours = workspace.root / CONFIG_FILE_NAME
    if (found is None or (found == home and not explicit)) and ours.is_file():
        found = str(ours)
    return found


def _readable(path: str) -> bool:
    try:
        return os.path.isfile(path) and os.access(path, os.R_OK)
    except (OSError, ValueError):
        return False


def read_config_file(config_path: str) -> dict[str, Any]:
    """The content of an OpenLineage config file, refusing one that cannot be used.

    The client logs a broken file and carries on unconfigured; events would then silently go
    to the default file, so refuse instead.
    """
    try:
        with open(config_path, encoding="utf-8") as handle:
            content = yaml.safe_load(handle)
    except (OSError, yaml.YAMLError) as exc:
        raise TransportConfigError(
            f"OpenLineage config file {config_path} cannot be read: {error_text(exc)}; fix it"
        ) from None
    if content is None:
        return {}
    if not isinstance(content, dict):
        raise TransportConfigError(
            f"OpenLineage config file {config_path} is not a mapping (got "
            f"{type(content).__name__}); it needs a top-level 'transport:' section"
        )
    return content
