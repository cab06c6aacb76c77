"""Refusals of the OpenLineage side: events, dataset names, the outbox and the transport."""

from __future__ import annotations

from dws_dagster.errors.base import DwsError


class EventBuildError(DwsError, ValueError):
    """The data given for an asset's run cannot become a valid OpenLineage event."""


class InvalidLocationError(DwsError, ValueError):
    """A dataset location cannot be given an OpenLineage namespace and name."""


class OutboxError(DwsError):
    """The OpenLineage outbox cannot take or send events as asked (events that are not
    RunEvents, a transport that is disabled, ...). Damage to the outbox's own rows is a
    `WorkspaceConfigError`, as for any damaged data of the workspace.

    Examples:
        Met through the command line, which prints its message and exits 1:

        .. code-block:: console

            $ OPENLINEAGE_DISABLED=true dws-dagster openlineage replay
            error: OpenLineage is disabled (noop transport): a replay would reach no catalog; ...
    """


class TransportConfigError(DwsError):
    """The OpenLineage transport configuration cannot be read or used.

    Examples:
        With `OPENLINEAGE_CONFIG` naming a file that is not there, the lineage sensor's tick fails
        before it applies anything (its cursor stays), as a call of `process_events` does:

        .. code-block:: python

            from dagster import DagsterInstance

            from dws_dagster import TransportConfigError, Workspace, process_events

            with DagsterInstance.get() as instance:
                try:
                    process_events(instance, Workspace.open())
                except TransportConfigError as exc:
                    print(exc)  # OPENLINEAGE_CONFIG names ..., which is not a readable file; ...

        .. code-block:: console

            $ dws-dagster openlineage status  # the transport, or why it is not usable
    """
