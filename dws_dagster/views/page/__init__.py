"""The offline HTML lineage page: `document` (the HTML, its inlined `assets/` and vendored
dagre in `_vendor/`, and escaping) around `content` (the page's data), built from `groups`
(graph nodes grouped into the page's nodes), `details` (each node's details and history),
`columns` (column-level lineage) and `verdicts` (a replayed snapshot's verdicts on its nodes).

Import rule: as `views`.
"""
