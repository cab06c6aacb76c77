// @ts-check
/* What a person can do, each as one function that changes State and then everything that
 * shows it: select a node, trace a column (and stop), open a node's columns, show the whole
 * replay. The nodes, the panel, the banner and the search box call these (they are handed
 * them), so none of them depends on another. */
/* global ColumnTrace, Data, NodeView, PanZoom, PanelDetails, PanelReplay, State */
/* exported Actions */

/**
 * @typedef {Object} PageActions
 * @property {(g: number, opts?: SelectOptions) => void} select
 * @property {(g: number, c: string) => void} selectColumn
 * @property {() => void} clearColumn
 * @property {(g: number) => void} toggleColumns
 * @property {() => void} showReplay
 */

const Actions = (() => {
  /** @type {PageActions} handed to the panel, which calls back into these */
  const actions = { select, selectColumn, clearColumn, toggleColumns, showReplay };

  /**
   * Node g selected, its details in the panel.
   * @param {number} g
   * @param {SelectOptions} [opts]
   */
  function select(g, opts = {}) {
    NodeView.markSelected(g);
    State.setSelected(g);
    PanelDetails.render(g, opts, actions);
    if (opts.centre) PanZoom.centreOn(g, opts.scale);
  }

  /**
   * Trace a column: the nodes on its path show their columns (so they are laid out again),
   * and the view shows the whole path if it fits at a readable size, else the column's node.
   * @param {number} g
   * @param {string} c
   */
  function selectColumn(g, c) {
    const t = ColumnTrace.trace(g, c);
    State.setTrace(t);
    NodeView.refreshColumns();
    PanZoom.relayout(g);
    PanZoom.showBox(PanZoom.boxOf(t.groups), g, PanZoom.MIN_READABLE);
    select(g);
  }

  /** Stop tracing: columns as they were, the panel without the trace. */
  function clearColumn() {
    const t = State.get().trace;
    if (!t) return;
    State.setTrace(null);
    NodeView.refreshColumns();
    PanZoom.relayout(t.g);
    const selected = State.get().selected;
    if (selected !== null) PanelDetails.render(selected, {}, actions);
    else if (Data.replay) showReplay();
  }

  /** @param {number} g a node whose columns are opened, or folded */
  function toggleColumns(g) {
    State.toggleExpanded(g);
    NodeView.fillColumns(g);
    PanZoom.relayout(g);
  }

  /** The whole replay in the panel, no node selected. */
  function showReplay() {
    if (!Data.replay) return;
    NodeView.markSelected(null);
    State.setSelected(null);
    PanelReplay.render(Data.replay, actions);
  }

  return actions;
})();
