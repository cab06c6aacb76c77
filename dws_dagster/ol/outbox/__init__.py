"""The durable outbox of OpenLineage events, in the workspace store.

- `outbox`: `Outbox`, spooling events and delivering them (the transactions, the lease, the
  delivery loop);
- `event_rows`: an event as its row keeps it, checked both ways; `event_table` and
  `delivery_table`: the statements on `dws_ol_events` and `dws_ol_delivery`;
- `report`: what a delivery call reports and the outbox at a glance;
- `errors`: `OutboxError` and the damage of the outbox's own rows; `times`: the times it reads
  and stores as text.

Import rule: imports sqlalchemy, the workspace store's `schema`, `ol.timestamps` and
`ol.transport`; never dagster or pyspark. The table modules take a connection the caller
opened and import nothing of `outbox`, so no transaction is held while a catalog answers.
"""
