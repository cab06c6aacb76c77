"""ResourceRef: a resource name plus a subpath that can never leave its resource."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, NamedTuple, Self

from dws_dagster.errors import InvalidResourceRefError

#: Resource names are single path components, safe in file names and in `name/subpath` strings.
RESOURCE_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
MAX_SUBPATH_BYTES = 4096
MAX_COMPONENT_BYTES = 255
_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def validate_resource_name(name: Any) -> str:
    """Return `name` if it is a valid resource name, else raise InvalidResourceRefError."""
    if (
        not isinstance(name, str)
        or not RESOURCE_NAME_PATTERN.fullmatch(name)
        or name in (".", "..")
    ):
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


class _ResourceRefFields(NamedTuple):
    """The fields of `ResourceRef`, named as in Data Workspaces' own `ResourceRef`.

    A separate base because a NamedTuple's class body may not override `__new__`: the subclass
    below does, so that no ref exists without having been validated and normalised.
    """

    name: str
    subpath: str | None = None


class ResourceRef(_ResourceRefFields):
    """A resource of the workspace, or a path inside it: the unit of lineage and versioning.

    `ResourceRef("intermediate", "hourly/2024-01")` is written `intermediate/hourly/2024-01`.
    As in Data Workspaces it is a named tuple `(name, subpath)`, so code written for
    `dataworkspaces.lineage.ResourceRef` keeps working: `name, subpath = ref` unpacks it, it
    equals and hashes like the plain tuple `(name, subpath)`, and `_replace`, `_asdict` and
    pickling work. Unlike Data Workspaces' tuple it validates: every way of making one
    (calling it, `_make`, `_replace`, unpickling, `copy.copy`/`deepcopy`) checks the name and
    normalises the subpath, which never escapes the resource, or raises
    InvalidResourceRefError.

    Refs sort by name, then subpath component by component (`a/b` < `a/b/c` < `a/b-c`), so a
    ref sorts right before the refs inside it and a `None` subpath (the whole resource) sorts
    first instead of failing as tuple order would. Compared with anything that is not a
    ResourceRef, `<`, `<=`, `>` and `>=` return NotImplemented: against a plain tuple (or
    another library's named tuple) Python then falls back to tuple order, element by element,
    which raises TypeError where a `None` subpath meets a string.

    Examples:
        .. code-block:: python

            from dws_dagster import ResourceRef

            ref = ResourceRef("intermediate-data", "hourly/2024-01")
            assert str(ref) == "intermediate-data/hourly/2024-01"
            assert ResourceRef.parse("intermediate-data/hourly/2024-01") == ref
            name, subpath = ref  # a named tuple, as in Data Workspaces
            whole = ResourceRef("intermediate-data")  # the whole resource (subpath None)
            assert whole.covers(ref)
    """

    __slots__ = ()

    def __new__(cls, name: str, subpath: str | None = None) -> Self:
        validate_resource_name(name)
        return super().__new__(cls, name, normalize_subpath(subpath, resource=name))

    @classmethod
    def _make(cls, iterable: Iterable[Any]) -> Self:  # type: ignore[override]  # validates
        """Build from `(name, subpath)`, validated (namedtuple's own `_make` skips `__new__`)."""
        values = tuple(iterable)
        if len(values) != len(cls._fields):
            raise TypeError(f"Expected {len(cls._fields)} arguments, got {len(values)}")
        return cls(*values)

    def _replace(self, /, **changes: Any) -> Self:
        """A copy with some fields changed, validated and normalised like a new ref."""
        unknown = [field for field in changes if field not in self._fields]
        if unknown:
            raise ValueError(f"Got unexpected field names: {unknown!r}")
        return type(self)(**{**self._asdict(), **changes})

    def __reduce__(self) -> tuple[type[Self], tuple[str, str | None]]:
        """Pickle and copy as a call to the class, so unpickling validates under every protocol
        (protocols 0 and 1 would otherwise rebuild the tuple with `tuple.__new__`)."""
        return type(self), (self.name, self.subpath)

    @classmethod
    def parse(cls, text: str) -> Self:
        """Parse `name` or `name/sub/path` (the form `str()` gives)."""
        if not isinstance(text, str) or not text.strip():
            raise InvalidResourceRefError(
                f"invalid ref {text!r}: write it as RESOURCE or RESOURCE/SUBPATH"
            )
        name, _, subpath = text.partition("/")
        return cls(name, subpath or None)

    def __str__(self) -> str:
        return self.name if self.subpath is None else f"{self.name}/{self.subpath}"

    def _order(self) -> tuple[str, tuple[str, ...]]:
        return self.name, self.parts

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, ResourceRef):
            return NotImplemented
        return self._order() < other._order()

    def __le__(self, other: object) -> bool:
        if not isinstance(other, ResourceRef):
            return NotImplemented
        return self._order() <= other._order()

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, ResourceRef):
            return NotImplemented
        return self._order() > other._order()

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, ResourceRef):
            return NotImplemented
        return self._order() >= other._order()

    @property
    def parts(self) -> tuple[str, ...]:
        """The subpath's components, `()` for the whole resource."""
        return () if self.subpath is None else tuple(self.subpath.split("/"))

    def covers(self, other: ResourceRef) -> bool:
        """True when this ref is strictly higher in the hierarchy than `other`: same resource,
        and `other` lies inside this ref, component by component.

        Data Workspaces' meaning, kept so code ported from it behaves the same: a ref does not
        cover itself. `bar/b` covers `bar/b/c`, but not `bar/b` nor `bar/baz`. Where being the
        same ref counts too (claims, overlaps), use `covers_or_equals`.
        """
        mine, theirs = self.parts, other.parts
        return self.name == other.name and len(theirs) > len(mine) and theirs[: len(mine)] == mine

    def covers_or_equals(self, other: ResourceRef) -> bool:
        """True when `other` is this ref or lies inside it: `covers(other) or self == other`.

        The inclusive test, for callers to whom the ref itself counts: `bar/b` covers-or-equals
        `bar/b` and `bar/b/c`, but not `bar/baz`.
        """
        mine = self.parts
        return self.name == other.name and other.parts[: len(mine)] == mine

    def overlaps(self, other: ResourceRef) -> bool:
        """True when the two refs share data: they are equal or one covers the other."""
        return self.covers_or_equals(other) or other.covers_or_equals(self)

    def child(self, relative: str) -> ResourceRef:
        """The ref of `relative` (a subpath, validated) inside this ref."""
        relative_norm = normalize_subpath(relative, resource=self.name)
        if relative_norm is None:
            return self
        return ResourceRef(
            self.name, relative_norm if self.subpath is None else f"{self.subpath}/{relative_norm}"
        )

    def ancestors(self) -> list[ResourceRef]:
        """Refs that strictly cover this one, nearest last: `r`, `r/a` for `r/a/b`."""
        parts = self.parts
        return [ResourceRef(self.name, "/".join(parts[:i]) or None) for i in range(len(parts))]


def as_ref(value: ResourceRef | str) -> ResourceRef:
    """Accept a ResourceRef, its string form, or another library's ref with `name` and
    `subpath` attributes (Data Workspaces' named tuple), which is validated like a new ref."""
    if isinstance(value, ResourceRef):
        return value
    if isinstance(value, str):
        return ResourceRef.parse(value)
    # Duck-type refs from other libraries (for example dataworkspaces' NamedTuple).
    name, subpath = getattr(value, "name", None), getattr(value, "subpath", None)
    if name is not None:
        return ResourceRef(name, subpath)
    raise InvalidResourceRefError(f"expected a ResourceRef or 'resource/subpath', got {value!r}")
