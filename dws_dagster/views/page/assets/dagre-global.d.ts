// The vendored dagre (`_vendor/dagre.min.js`, inlined before the page's script) defines the
// global `dagre`. Its types are those of the same version's npm package, a development
// dependency pinned in package.json to the vendored version (tests/test_lineage_page_script.py
// checks that the two agree).
declare const dagre: typeof import("@dagrejs/dagre").default;
