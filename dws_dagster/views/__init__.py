"""How the lineage is shown.

- The versioned graph around a ref: `graph` (built from the store), `graph_model` (its nodes,
  edges and last run); refs grouped for reading: `grouping`.
- Text: `lineage_text` (the `lineage` report, partitions grouped), `diff_text`.
- The report around the focus, every node on its own line: `report` (text and JSON);
  drawings: `diagrams` (Graphviz DOT, Mermaid, and the entry point to the HTML page); what
  they share: `focus` (nodes and edges to show, the walk from the focus, the last run's rows).
- `status/`: what `status` reports of every ref and the verdicts of the workspace's
  guarantees, shared with the dws asset checks.
- `page/`: the offline HTML lineage page.

Versions are shortened for display by `workspace.versions.short` everywhere, the CLI included.

Import rule: `workspace`, `store`, `snapshots` and `replay`'s records; neither dagster nor
pyspark; reads the store, never writes it.
"""
