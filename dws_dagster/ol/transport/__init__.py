"""Where OpenLineage events go, laid out as the OpenLineage client's own `transport` package:
the client's `Transport` classes, built from its own configuration, do the sending; these
modules change only what a durable outbox needs of them.

- `factory`: `make_transport`, the configured transport for a workspace (the client's
  resolution, with the workspace's defaults and one request per delivery attempt);
- `config`: the config file the client would read, refused when it is broken;
- `http`: the `requests` adapter of HTTP delivery (no redirect taken for a delivery), and
  `deadline`: a deadline for every event, however slowly the catalog answers;
- `emitter`: sending spooled events, one delivery at a time;
- `text`: what a transport does, in a few words, and the removal of its secrets from text.

Import rule: imports openlineage's public API (its internals only through
`dws_dagster._compat.openlineage`), requests and urllib3, and of this package only `errors`
and `workspace/` (for types); never dagster or pyspark. Nothing here imports the outbox.
"""
