// @ts-check
/* The page's data: the JSON that page_content.page_data makes and lineage_page.py embeds in
 * the page's element #lineage-data (of type application/json), read once when it opens.
 *
 * The typedefs below are the contract with page_content.py: tests/views/test_lineage_page_script.py
 * reads them and checks, on real pages, that every object carries exactly the properties its
 * typedef names (a `[name]` may be absent). Keep them to `@typedef {Object}` with
 * `@property` lines, tuples, `A & B` and plain type names, which that test understands. */
/* global Dom */
/* exported Data */

/**
 * @typedef {Object} PageData
 * @property {number} format version of this layout
 * @property {string} title
 * @property {PageFocus} focus
 * @property {string | null} snapshot the snapshot the page is drawn from, if any
 * @property {string[]} statuses display statuses; `parts.status` holds indexes into it
 * @property {string[]} runs run ids; `parts.run` holds indexes into it
 * @property {PageGroup[]} groups the nodes
 * @property {GroupEdge[]} edges
 * @property {ColumnEdge[]} column_edges
 * @property {PageCounts} counts
 * @property {boolean} truncated whether the lineage stopped before its end
 * @property {ReplaySummary} [replay] on the page of a replayed snapshot
 */

/**
 * @typedef {Object} PageFocus
 * @property {number} group the focus's node
 * @property {number} member the focus among the node's members
 * @property {string} id
 * @property {string} ref
 */

/**
 * @typedef {Object} PageCounts
 * @property {number} nodes graph nodes (ref@version) behind the page's nodes
 * @property {number} edges
 */

/** @typedef {[number, number, number, number]} GroupEdge source, target, inputs, stale ones */

/**
 * Column to column (or, with a null target column, to the target's rows): source node,
 * column, target node, column, kind, subtype.
 * @typedef {[number, string, number, string | null, string, string | null]} ColumnEdge
 */

/**
 * A column source outside the graph: where, column, into column (null: rows), kind, subtype.
 * @typedef {[string, string, string | null, string, string | null]} ExternalColumn
 */

/**
 * One node: an asset's partitions, a step's output, a source, a folder of files.
 * @typedef {Object} PageGroup
 * @property {number} id
 * @property {string} key
 * @property {string} kind "asset", "step", "source", "files" or "ref"
 * @property {string} name
 * @property {string} ref
 * @property {string | null} step
 * @property {string | null} role
 * @property {boolean} focus
 * @property {boolean} partitioned
 * @property {number} count distinct keys
 * @property {number} members
 * @property {[string, string] | null} range first and last key
 * @property {Record<string, number>} counts members per status
 * @property {string} status the worst
 * @property {GroupDetails} details
 * @property {LastRun | null} last_run
 * @property {(HistoryVersion | HistoryRun)[]} history
 * @property {string[]} columns
 * @property {ExternalColumn[]} external_columns
 * @property {number} self_reads inputs among its own members
 * @property {GroupParts} parts
 * @property {GroupReplay | null} [replay] on the page of a replayed snapshot
 */

/**
 * @typedef {Object} GroupDetails
 * @property {number} member the member these details are of
 * @property {string | null} version
 * @property {string} status
 * @property {string | null} step
 * @property {string | null} role
 * @property {string | null} run_id
 * @property {string | null} start_time
 * @property {string | null} end_time
 * @property {Record<string, unknown> | null} metrics
 * @property {string} [format]
 * @property {number} [rows]
 * @property {number} [rows_of] members the rows are summed over
 * @property {Record<string, number>} [code_versions]
 * @property {number} [code_versions_more]
 * @property {Record<string, number>} [git_commits]
 * @property {number} [git_commits_more]
 * @property {Record<string, unknown>} parameters those every member shares
 * @property {string[]} varying names of the others
 */

/**
 * One run of a node, as its record says.
 * @typedef {Object} RunEntry
 * @property {string | null} version
 * @property {string} status
 * @property {string | null} step
 * @property {string | null} run_id
 * @property {string | null} partition
 * @property {string | null} code_version
 * @property {string | null} git_commit
 * @property {string | null} start_time
 * @property {string | null} end_time
 * @property {number | null} duration_seconds
 * @property {Record<string, unknown>} parameters
 * @property {Record<string, unknown> | null} metrics
 * @property {string | null} error
 */

/**
 * @typedef {Object} RunCount
 * @property {number} runs
 */

/** @typedef {RunEntry & RunCount} LastRun */

/**
 * @typedef {Object} CurrentMark
 * @property {boolean} current whether this is the version the node stands at
 */

/** @typedef {RunEntry & CurrentMark} HistoryVersion an earlier version of a single ref */

/**
 * A run that made members of a node of many refs.
 * @typedef {Object} HistoryRun
 * @property {string | null} run_id
 * @property {string} status
 * @property {number} count
 * @property {string} first
 * @property {string} last
 * @property {string} end_time
 * @property {string | null} start_time
 */

/**
 * The members, as columns.
 * @typedef {Object} GroupParts
 * @property {string[]} key
 * @property {(string | null)[]} version
 * @property {string} status one digit per member: its index in `statuses`
 * @property {(string | null)[]} end
 * @property {number[]} run index in `runs`, -1 for none
 * @property {string[]} [ref] when the keys do not say the refs
 */

/**
 * @typedef {Object} GroupReplay
 * @property {string} verdict the worst
 * @property {Record<string, number>} counts
 * @property {number} judged
 * @property {string} marks one character per member: its verdict's index, "-" if not judged
 * @property {MemberVerdict[]} entries
 * @property {number} entries_more
 */

/**
 * @typedef {Object} VerdictEntry
 * @property {string} verdict
 * @property {string | null} step
 * @property {string | null} recorded
 * @property {string | null} reproduced
 * @property {string | null} detail
 * @property {string[] | null} columns
 */

/**
 * @typedef {Object} MemberIndex
 * @property {number} member
 */

/** @typedef {VerdictEntry & MemberIndex} MemberVerdict */

/**
 * @typedef {Object} OutsideRef
 * @property {string} ref
 * @property {boolean} in_graph whether another version of it is drawn
 */

/** @typedef {VerdictEntry & OutsideRef} OutsideVerdict */

/**
 * @typedef {Object} ReplaySummary
 * @property {string | null} snapshot
 * @property {string | null} snapshot_name
 * @property {string[]} tags
 * @property {string | null} replayed_at
 * @property {string | null} into
 * @property {boolean} in_place
 * @property {boolean} reproduced
 * @property {string[]} verdicts `marks` hold indexes into it
 * @property {number} refs
 * @property {Record<string, number>} counts
 * @property {number} drawn
 * @property {OutsideVerdict[]} outside
 * @property {number} outside_count
 * @property {Record<string, number>} outside_counts
 */

const Data = (() => {
  const started = performance.now();
  /** @type {PageData} */
  const page = JSON.parse(Dom.byId("lineage-data").textContent || "null");
  const parsed = performance.now();
  return {
    page,
    /** The nodes, by index. */
    groups: page.groups,
    statuses: page.statuses,
    columnEdges: page.column_edges,
    replay: page.replay || null,
    /** The focus's node. */
    focus: page.focus.group,
    /** When the script started and when the data was read (performance.now()). */
    started,
    parsed,
  };
})();
