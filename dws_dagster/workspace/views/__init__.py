"""How the lineage is shown: the versioned graph around a ref (`graph`, `graph_model`), refs
grouped for reading (`grouping`), and its renderings: text (`lineage_text`, `diff_text`,
`status_report`), JSON, DOT and Mermaid (`render`), and the offline HTML page (`lineage_page`).

Import rule: part of `workspace`, so neither dagster nor pyspark; reads the store, never writes it.
"""
