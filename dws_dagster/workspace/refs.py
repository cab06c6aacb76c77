"""ResourceRef: a resource name plus a subpath that can never leave its resource."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidResourceRefError

#: Resource names are single path components, safe in file names and in `name/subpath` strings.
RESOURCE_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
MAX_SUBPATH_BYTES = 4096
MAX_COMPONENT_BYTES = 255
_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def validate_resource_name(name: Any) -> str:
    """Return `name` if it is a valid resource name, else raise InvalidResourceRefError."""
    if not isinstance(name, str) or not RESOURCE_NAME_PATTERN.fullmatch(name) \
            or name in (".", ".."):
        raise InvalidResourceRefError(
            f"invalid resource name {name!r}: use 1-128 letters, digits, '_', '-' or '.', "
            "starting with a letter, digit or '_'"
        )
    return name


def normalize_subpath(subpath: Any, *, resource: str = "?") -> str | None:
    """Normalise a subpath ('a//b/./c/' -> 'a/b/c'; '' and '.' -> None), refusing escapes.

    `..` components are refused outright rather than resolved, so no spelling of a subpath can
    point outside its resource, whatever the filesystem or object store underneath.
    """
    if subpath is None:
        return None
    if not isinstance(subpath, str):
        raise InvalidResourceRefError(
            f"subpath of resource '{resource}' must be a string, got {type(subpath).__name__}"
        )
    shown = subpath.replace("\x00", "\\0")
    if "\x00" in subpath or _CONTROL_CHARS.search(subpath):
        raise InvalidResourceRefError(
            f"subpath {shown!r} of resource '{resource}' contains a NUL or control character: "
            "remove it"
        )
    try:
        subpath.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidResourceRefError(
            f"subpath {subpath.encode('utf-8', 'backslashreplace').decode()!r} of resource "
            f"'{resource}' is not valid UTF-8 (a file name in another encoding?): rename it"
        ) from None
    if "\\" in subpath:
        raise InvalidResourceRefError(
            f"subpath {shown!r} of resource '{resource}' contains a backslash: "
            "separate components with '/'"
        )
    if subpath.startswith("/") or re.match(r"^[A-Za-z]:", subpath):
        raise InvalidResourceRefError(
            f"subpath {shown!r} of resource '{resource}' is absolute: give it relative to the "
            "resource's root"
        )
    if len(subpath.encode("utf-8")) > MAX_SUBPATH_BYTES:
        raise InvalidResourceRefError(
            f"subpath of resource '{resource}' is {len(subpath.encode('utf-8'))} bytes long; "
            f"the limit is {MAX_SUBPATH_BYTES}: shorten it (starts {shown[:60]!r})"
        )
    parts = [p for p in subpath.split("/") if p not in ("", ".")]
    for part in parts:
        if part == "..":
            raise InvalidResourceRefError(
                f"subpath {shown!r} of resource '{resource}' contains '..': a ref may not "
                "leave its resource; name the other resource instead"
            )
        if len(part.encode("utf-8")) > MAX_COMPONENT_BYTES:
            raise InvalidResourceRefError(
                f"subpath {shown[:60]!r}... of resource '{resource}' has a component longer "
                f"than {MAX_COMPONENT_BYTES} bytes: shorten it"
            )
    return "/".join(parts) or None


@functools.total_ordering
@dataclass(frozen=True)
class ResourceRef:
    """A resource of the workspace, or a path inside it: the unit of lineage and versioning.

    `ResourceRef("intermediate", "hourly/2024-01")` is written `intermediate/hourly/2024-01`.
    Subpaths are normalised on construction and never escape the resource.
    """

    name: str
    subpath: str | None = None

    def __post_init__(self) -> None:
        validate_resource_name(self.name)
        object.__setattr__(self, "subpath", normalize_subpath(self.subpath, resource=self.name))

    @classmethod
    def parse(cls, text: str) -> ResourceRef:
        """Parse `name` or `name/sub/path` (the form `str()` gives)."""
        if not isinstance(text, str) or not text.strip():
            raise InvalidResourceRefError(
                f"invalid ref {text!r}: write it as RESOURCE or RESOURCE/SUBPATH"
            )
        name, _, subpath = text.partition("/")
        return cls(name, subpath or None)

    def __str__(self) -> str:
        return self.name if self.subpath is None else f"{self.name}/{self.subpath}"

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, ResourceRef):
            return NotImplemented
        return (self.name, self.parts) < (other.name, other.parts)

    @property
    def parts(self) -> tuple[str, ...]:
        return () if self.subpath is None else tuple(self.subpath.split("/"))

    def covers(self, other: ResourceRef) -> bool:
        """True when `other` is this ref or lies inside it, component by component.

        `bar/b` covers `bar/b` and `bar/b/c`, but not `bar/baz`.
        """
        if self.name != other.name:
            return False
        mine, theirs = self.parts, other.parts
        return theirs[: len(mine)] == mine

    def overlaps(self, other: ResourceRef) -> bool:
        """True when one of the two refs covers the other."""
        return self.covers(other) or other.covers(self)

    def child(self, relative: str) -> ResourceRef:
        """The ref of `relative` (a subpath, validated) inside this ref."""
        relative_norm = normalize_subpath(relative, resource=self.name)
        if relative_norm is None:
            return self
        return ResourceRef(self.name, relative_norm if self.subpath is None
                           else f"{self.subpath}/{relative_norm}")

    def ancestors(self) -> list[ResourceRef]:
        """Refs that strictly cover this one, nearest last: `r`, `r/a` for `r/a/b`."""
        parts = self.parts
        return [ResourceRef(self.name, "/".join(parts[:i]) or None) for i in range(len(parts))]


def as_ref(value: ResourceRef | str) -> ResourceRef:
    """Accept a ResourceRef or its string form."""
    if isinstance(value, ResourceRef):
        return value
    if isinstance(value, str):
        return ResourceRef.parse(value)
    # Duck-type refs from other libraries (for example dataworkspaces' NamedTuple).
    name, subpath = getattr(value, "name", None), getattr(value, "subpath", None)
    if name is not None:
        return ResourceRef(name, subpath)
    raise InvalidResourceRefError(f"expected a ResourceRef or 'resource/subpath', got {value!r}")
