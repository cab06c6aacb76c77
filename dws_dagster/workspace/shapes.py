"""The rules of names read from files and rows that become file names: refs, versions,
snapshot hashes, tags and results folders.

Each rule is defined here once, so the file formats (`formats`, which use them as field
types), the code building paths from such names, and the commands refusing a name a user
typed all apply the same rule. The patterns are plain `re` patterns without look-ahead.
"""

from __future__ import annotations

import re
from typing import Any

from dws_dagster.errors import SnapshotError
from dws_dagster.workspace.refs import MAX_COMPONENT_BYTES, MAX_SUBPATH_BYTES

#: A snapshot hash: xxh3-128 as lowercase hex.
SNAPSHOT_HASH_PATTERN = r"^[0-9a-f]{32}$"
SNAPSHOT_HASH = re.compile(SNAPSHOT_HASH_PATTERN)
#: A stored ref (normalised): a resource name, then components that are neither `.` nor `..`,
#: without backslashes or control characters. The same rules as `ResourceRef`, without
#: look-ahead: a component starts with a character other than a dot, or with one dot and
#: another character, or with two dots and at least one more.
_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_CHAR = r"[^/\\\x00-\x1f\x7f-\x9f]"
_NODOT = r"[^./\\\x00-\x1f\x7f-\x9f]"
_PART = rf"(?:{_NODOT}{_CHAR}*|\.{_NODOT}{_CHAR}*|\.\.{_CHAR}+)"
REF_PATTERN = rf"^{_NAME}(?:/{_PART})*$"
#: A folder inside the workspace, relative to its root: "." or components as a ref's.
WORKING_FOLDER_PATTERN = rf"^(?:\.|{_PART}(?:/{_PART})*)$"
#: A version stored in a record names a kept copy (`@<version>`): one file name at most.
VERSION_PATTERN = r"^[^/\\\x00-\x1f\x7f-\x9f]{1,254}$"
_VERSION_RE = re.compile(VERSION_PATTERN)
#: The longest a stored ref may be: a resource name and a subpath of at most 4096 bytes.
MAX_REF_LENGTH = 4096 + 129
#: A snapshot's results folder name when it has no tag: its short hash.
SHORT_HASH = re.compile(r"^[0-9a-f]{12}$")
#: What `diff` calls the current lineage, so no tag may be named so.
CURRENT = "current"
_HEXISH = re.compile(r"^[0-9a-f]{4,}$")  # as short as a usable hash prefix

_REF_RE = re.compile(REF_PATTERN)
#: Refs found valid, so each is matched once however many records name it (a store repeats
#: every ref in the provenance of each record downstream of it). Bounded: cleared when full.
GOOD_REFS: set[str] = set()
GOOD_REFS_MAX = 1 << 20


def validate_tag(tag: str) -> str:
    """Refuse a tag that cannot name a folder, be printed or be told from a hash, before
    anything is written. A tag names a results folder, and its staging copy
    `.dws-staging-<tag>-<32 hex>` too: file names hold 255 bytes, so a tag holds 200 (UTF-8)."""
    max_bytes = 200
    if (
        not isinstance(tag, str)
        or not tag
        or len(tag) > 128
        or any(c.isspace() or c in "/\\\x00" or not c.isprintable() for c in tag)
        or tag in (".", "..", CURRENT)
    ):
        raise SnapshotError(
            f"invalid tag {tag!r}: use 1-128 printable characters without "
            f"spaces or slashes, other than '{CURRENT}'"
        )
    size = len(tag.encode("utf-8"))
    if size > max_bytes:
        raise SnapshotError(
            f"tag {tag[:20]!r}... is {size} bytes in UTF-8; a tag names a folder, so it may "
            f"hold at most {max_bytes} bytes: choose a shorter tag"
        )
    if _HEXISH.match(tag):
        raise SnapshotError(
            f"tag {tag!r} looks like a snapshot hash; choose a tag that does "
            "not (for example 'v-{tag}')"
        )
    return tag


def is_tag(value: Any) -> bool:
    try:
        validate_tag(value)
    except SnapshotError:
        return False
    return True


def results_folder_ok(value: Any) -> bool:
    """`snapshots/<name>`, where name is a tag or a short hash: the only folder a snapshot's
    results copy may have inside its results resource."""
    if type(value) is not str:
        return False
    head, slash, name = value.partition("/")
    return (
        head == "snapshots"
        and bool(slash)
        and (SHORT_HASH.fullmatch(name) is not None or is_tag(name))
    )


def version_ok(value: Any) -> bool:
    """Whether `value` is a version that can name a kept copy (`VERSION_PATTERN`): the usual
    one, printable, is told without the pattern, which costs twice as much on every record."""
    if type(value) is not str:
        return False
    if 0 < len(value) <= 254 and value.isprintable() and "/" not in value and "\\" not in value:
        return True  # printable: no control character, so within the pattern
    return _VERSION_RE.fullmatch(value) is not None


def ref_ok(value: Any) -> bool:
    """Whether `value` surely is a ref (`ResourceRef`'s rules), remembering refs seen."""
    if type(value) is not str:
        return False
    if value in GOOD_REFS:
        return True
    if len(value) > MAX_REF_LENGTH or _REF_RE.fullmatch(value) is None or not ref_sizes_ok(value):
        return False
    if len(GOOD_REFS) >= GOOD_REFS_MAX:
        GOOD_REFS.clear()
    GOOD_REFS.add(value)
    return True


def ref_sizes_ok(value: str) -> bool:
    """The byte limits `ResourceRef` puts on a subpath and its components (file names hold
    255 bytes), which a pattern cannot count: a stored ref beyond them is a damaged file, not a
    ref to refuse later."""
    _, _, subpath = value.partition("/")
    encoded = subpath.encode("utf-8", "surrogatepass")
    if len(encoded) <= MAX_COMPONENT_BYTES:
        return True
    return len(encoded) <= MAX_SUBPATH_BYTES and all(
        len(part) <= MAX_COMPONENT_BYTES for part in encoded.split(b"/")
    )
