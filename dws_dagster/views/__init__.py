"""How the lineage is shown.

- The versioned graph around a ref: `graph` (built from the store), `graph_model` (its nodes,
  edges and last run); refs grouped for reading: `grouping`.
- Text: `lineage_text` (the `lineage` report, partitions grouped), `diff_text`,
  `status_report`.
- The report around the focus, every node on its own line: `render_report` (text and JSON);
  drawings: `render_diagram` (Graphviz DOT, Mermaid, and the entry point to the HTML page);
  what they share: `render_parts` (nodes and edges to show, the walk from the focus, the last
  run's rows).
- The offline HTML page: `lineage_page` (the HTML, inlined assets and escaping) around
  `page_content` (the page's data), built from `page_groups` (graph nodes grouped into the
  page's nodes), `page_details` (each node's details and history), `page_columns`
  (column-level lineage) and `page_replay` (a replayed snapshot's verdicts on its nodes).

Versions are shortened for display by `workspace.versions.short` everywhere, the CLI included.

Import rule: part of `workspace`, so neither dagster nor pyspark; reads the store, never writes it.
"""
