"""ResourceRef: covering, normalisation, refusals, child/ancestors, and a property test."""

from __future__ import annotations

import copy
import itertools
import pickle
from typing import NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dws_dagster.errors import DwsError, InvalidResourceRefError
from dws_dagster.workspace.refs import (
    MAX_COMPONENT_BYTES,
    MAX_SUBPATH_BYTES,
    ResourceRef,
    as_ref,
    normalize_subpath,
    validate_resource_name,
)


def R(text: str) -> ResourceRef:
    return ResourceRef.parse(text)


# ----------------------------------------------------------------------------- covers / overlaps

COVERS_TABLE = [
    # (outer, inner, outer covers inner, outer covers-or-equals inner)
    ("bar", "bar", False, True),
    ("bar/b", "bar/b", False, True),
    ("bar/b/c", "bar/b/c", False, True),
    ("bar", "bar/b", True, True),
    ("bar", "bar/b/c/d", True, True),
    ("bar", "bar/baz", True, True),
    ("bar/b", "bar/b/c", True, True),
    ("bar/b", "bar/b/c/d/e", True, True),
    ("bar/b", "bar/baz", False, False),
    ("bar/b", "bar/bc", False, False),
    ("bar/b", "bar", False, False),
    ("bar/b/c", "bar/b", False, False),
    ("bar/b", "bar/a/b", False, False),
    ("bar/b", "bar/c", False, False),
    ("bar/date=1", "bar/date=10", False, False),
    ("bar", "baz", False, False),
    ("bar", "bars", False, False),
    ("bar", "ba", False, False),
    ("bar/b", "baz/b", False, False),
    ("bar/b", "baz/b/c", False, False),
    ("src", "inter", False, False),
]


@pytest.mark.parametrize(("outer", "inner", "expected", "_inclusive"), COVERS_TABLE)
def test_covers_truth_table(outer: str, inner: str, expected: bool, _inclusive: bool) -> None:
    assert R(outer).covers(R(inner)) is expected


@pytest.mark.parametrize(("outer", "inner", "_covers", "expected"), COVERS_TABLE)
def test_covers_or_equals_truth_table(
    outer: str, inner: str, _covers: bool, expected: bool
) -> None:
    assert R(outer).covers_or_equals(R(inner)) is expected
    assert expected is (R(outer).covers(R(inner)) or R(outer) == R(inner))


def test_covers_is_strict_as_in_data_workspaces() -> None:
    # "strictly higher in the hierarchy": a ref does not cover itself
    for text in ("bar", "bar/b", "bar/b/c"):
        assert not R(text).covers(R(text))
        assert R(text).covers_or_equals(R(text))
    assert R("bar/b").covers(R("bar/b/c"))
    assert not R("bar/b").covers(R("bar/baz"))
    assert not R("bar/b").covers_or_equals(R("bar/baz"))
    # the same ref however spelled
    assert not ResourceRef("bar", "b/").covers(ResourceRef("bar", "./b"))
    assert ResourceRef("bar", "b/").covers_or_equals(ResourceRef("bar", "./b"))
    assert not ResourceRef("bar", ".").covers(ResourceRef("bar"))


@pytest.mark.parametrize(("a", "b", "_covers", "_inclusive"), COVERS_TABLE)
def test_overlaps_is_symmetric_and_means_one_covers_the_other(
    a: str, b: str, _covers: bool, _inclusive: bool
) -> None:
    ra, rb = R(a), R(b)
    assert ra.overlaps(rb) is rb.overlaps(ra)
    assert ra.overlaps(rb) is (ra.covers_or_equals(rb) or rb.covers_or_equals(ra))
    assert ra.overlaps(rb) is (ra == rb or ra.covers(rb) or rb.covers(ra))


def test_overlaps_examples() -> None:
    assert R("bar/b").overlaps(R("bar/b/c"))
    assert R("bar/b/c").overlaps(R("bar/b"))
    assert not R("bar/b").overlaps(R("bar/bc"))
    assert not R("bar/bc").overlaps(R("bar/b"))
    assert not R("bar").overlaps(R("baz"))
    assert R("bar/b").overlaps(R("bar/b"))
    assert R("bar").overlaps(R("bar"))


def test_covers_uses_normalised_subpaths() -> None:
    assert ResourceRef("bar", "b/").covers(ResourceRef("bar", "./b//c/"))
    assert ResourceRef("bar", ".").covers(ResourceRef("bar", "anything"))
    assert not ResourceRef("bar", "b/").covers(ResourceRef("bar", "bc"))


# ------------------------------------------------------------------------------- named tuple


class ForeignRef(NamedTuple):
    """Shaped like Data Workspaces' own `ResourceRef`: a plain, unvalidated named tuple."""

    name: str
    subpath: str | None = None


def test_is_a_named_tuple_like_data_workspaces() -> None:
    ref = ResourceRef("res", "a//b/")
    assert isinstance(ref, tuple)
    assert ResourceRef._fields == ("name", "subpath")
    name, subpath = ref
    assert (name, subpath) == ("res", "a/b")
    assert ref == ("res", "a/b")
    assert ("res", "a/b") == ref  # noqa: SIM300 - the tuple on the left is the point
    assert ref != ("res", "a//b/")  # compared as normalised
    assert ResourceRef("res") == ("res", None)
    assert ref == ForeignRef("res", "a/b")
    assert ref._asdict() == {"name": "res", "subpath": "a/b"}
    assert ResourceRef(name="res", subpath="a") == ResourceRef("res", "a")
    assert repr(ref) == "ResourceRef(name='res', subpath='a/b')"
    assert str(ref) == f"{ref}" == "res/a/b"
    assert ref  # a whole resource too: always a 2-tuple, always true
    assert ResourceRef("res")


def test_hash_is_the_tuples() -> None:
    assert hash(ResourceRef("res", "a/./b")) == hash(("res", "a/b"))
    assert hash(ResourceRef("res")) == hash(("res", None))
    assert {("res", "a"): 1}[ResourceRef("res", "a/")] == 1
    assert {ResourceRef("res", "a"): 1}[ForeignRef("res", "a")] == 1


def test_fields_cannot_be_set() -> None:
    ref = ResourceRef("res", "a")
    with pytest.raises(AttributeError):
        ref.subpath = "../x"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        ref.other = 1  # type: ignore[attr-defined]


def test_replace_validates_and_normalises() -> None:
    ref = ResourceRef("res", "a")
    assert ref._replace(subpath="b//c/") == ResourceRef("res", "b/c")
    assert ref._replace(subpath="b//c/").subpath == "b/c"
    assert ref._replace(name="other") == ResourceRef("other", "a")
    assert ref._replace(subpath=None) == ResourceRef("res")
    assert type(ref._replace(subpath="x")) is ResourceRef
    with pytest.raises(InvalidResourceRefError, match=r"'\.\.'"):
        ref._replace(subpath="../x")
    with pytest.raises(InvalidResourceRefError, match="invalid resource name"):
        ref._replace(name="a/b")
    with pytest.raises(ValueError, match="unexpected field names"):
        ref._replace(path="x")  # type: ignore[call-arg]


def test_make_validates() -> None:
    assert ResourceRef._make(["res", "a//b"]) == ResourceRef("res", "a/b")
    assert ResourceRef._make(iter(["res", None])) == ResourceRef("res")
    with pytest.raises(InvalidResourceRefError, match="'res'"):
        ResourceRef._make(["res", "/etc"])
    with pytest.raises(TypeError, match="Expected 2 arguments, got 1"):
        ResourceRef._make(["res"])


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickle_round_trip(protocol: int) -> None:
    for ref in (ResourceRef("res"), ResourceRef("res", "a/b"), R("r_1.x-y/ä ö/ü")):
        back = pickle.loads(pickle.dumps(ref, protocol=protocol))
        assert back == ref
        assert type(back) is ResourceRef
        assert back.subpath == ref.subpath


def test_copy_and_deepcopy() -> None:
    ref = ResourceRef("res", "a/b")
    for copied in (copy.copy(ref), copy.deepcopy(ref), copy.deepcopy({"k": [ref]})["k"][0]):
        assert copied == ref
        assert type(copied) is ResourceRef


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_unpickling_and_copying_validate(protocol: int) -> None:
    # A ref that skipped validation (built with tuple.__new__, or bytes tampered with on the
    # way) is refused when it is unpickled or copied, not carried along.
    bad = tuple.__new__(ResourceRef, ("res", "../x"))
    data = pickle.dumps(bad, protocol=protocol)
    with pytest.raises(InvalidResourceRefError, match=r"'\.\.'"):
        pickle.loads(data)
    with pytest.raises(InvalidResourceRefError):
        copy.copy(bad)
    with pytest.raises(InvalidResourceRefError):
        copy.deepcopy(bad)
    unnormalised = pickle.loads(
        pickle.dumps(tuple.__new__(ResourceRef, ("res", "a//b/")), protocol=protocol)
    )
    assert unnormalised.subpath == "a/b"


def test_sorting_with_none_subpaths() -> None:
    refs = [R("b"), R("a/b/c"), R("a"), R("b/a"), R("a/b"), ResourceRef("a", None), R("a/b-c")]
    assert [str(r) for r in sorted(refs)] == ["a", "a", "a/b", "a/b/c", "a/b-c", "b", "b/a"]
    assert R("a") < R("a/b") <= R("a/b") < R("b")
    assert R("b") > R("a/b") >= R("a/b") > R("a")
    assert max([R("a"), R("a/z")]) == R("a/z")
    # by components, not characters: '-' sorts before '/', yet a/b/c comes first
    assert R("a/b/c") < R("a/b-c")
    assert ("a", "b/c") > ("a", "b-c")


def test_ordering_against_plain_tuples_follows_tuple_rules() -> None:
    # documented: ResourceRef's comparisons return NotImplemented, Python uses tuple order
    assert R("a/b") < ("a", "c")
    assert ("a", "c") > R("a/b")  # noqa: SIM300 - the tuple on the left is the point
    assert R("a/b") < ForeignRef("b")
    with pytest.raises(TypeError):
        _ = R("a") < ("a", "b")  # None against a string, as for tuples
    with pytest.raises(TypeError):
        sorted([R("a"), ("a", "b")])


def test_as_ref_takes_data_workspaces_named_tuples() -> None:
    ref = as_ref(ForeignRef("res", "a//b/"))  # type: ignore[arg-type]
    assert type(ref) is ResourceRef
    assert ref == ResourceRef("res", "a/b")
    assert as_ref(ForeignRef("res")) == ResourceRef("res")  # type: ignore[arg-type]
    with pytest.raises(InvalidResourceRefError, match=r"'\.\.'"):
        as_ref(ForeignRef("res", "../x"))  # type: ignore[arg-type]
    with pytest.raises(InvalidResourceRefError):
        as_ref(("res", "a"))  # type: ignore[arg-type]  # a bare tuple names no fields


# ------------------------------------------------------------------------------- normalisation


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("a//b/./c/", "a/b/c"),
        ("a/b/c", "a/b/c"),
        ("./a", "a"),
        ("a/.", "a"),
        ("a/./././b", "a/b"),
        ("a///", "a"),
        ("...", "..."),
        ("a/.b/..c", "a/.b/..c"),
        ("", None),
        (".", None),
        ("./", None),
        ("././/.", None),
        (None, None),
    ],
)
def test_normalisation(raw: str | None, expected: str | None) -> None:
    assert ResourceRef("res", raw).subpath == expected
    assert normalize_subpath(raw) == expected


def test_root_and_dot_subpath_equal_plain_resource() -> None:
    assert ResourceRef("res", "") == ResourceRef("res", ".") == ResourceRef("res")
    assert str(ResourceRef("res", ".")) == "res"
    assert ResourceRef("res", "").parts == ()


@pytest.mark.parametrize(
    "text",
    [
        "res",
        "res/a",
        "res/a/b/c",
        "res/date=2024-01-01/x.csv",
        "r_1.x-y/ä ö/ü",
        "res/...",
        "res/.hidden/x",
    ],
)
def test_str_parse_round_trip(text: str) -> None:
    ref = ResourceRef.parse(text)
    assert str(ref) == text
    assert ResourceRef.parse(str(ref)) == ref
    assert as_ref(text) == ref
    assert as_ref(ref) is ref


def test_parse_splits_name_and_normalises_subpath() -> None:
    ref = ResourceRef.parse("res/a//./b/")
    assert (ref.name, ref.subpath) == ("res", "a/b")
    assert str(ref) == "res/a/b"
    assert ResourceRef.parse("res/").subpath is None
    assert ref.parts == ("a", "b")


def test_equal_after_normalisation_hash_equal() -> None:
    a = ResourceRef("res", "a//b/./c/")
    b = ResourceRef("res", "a/b/c")
    c = ResourceRef.parse("res/a/b/c")
    assert a == b == c
    assert hash(a) == hash(b) == hash(c)
    assert len({a, b, c}) == 1
    assert {a: 1}[c] == 1
    assert ResourceRef("res", "a/b") != ResourceRef("res", "a/b/c")
    assert ResourceRef("res", "a") != ResourceRef("other", "a")
    assert len({ResourceRef("res", "a"), ResourceRef("res", "b"), ResourceRef("res")}) == 3


def test_ordering_of_refs_with_subpaths() -> None:
    refs = [R("b/x"), R("a/z"), R("a/b/c"), R("a/b")]
    assert [str(r) for r in sorted(refs)] == ["a/b", "a/b/c", "a/z", "b/x"]
    assert R("a/b") < R("a/c")
    assert R("a/z") < R("b/a")


def test_ordering_of_roots() -> None:
    assert sorted([R("c"), R("a"), R("b")]) == [R("a"), R("b"), R("c")]


def test_ordering_root_against_subpath_of_same_resource() -> None:
    assert sorted([R("a/b"), R("a")]) == [R("a"), R("a/b")]


@pytest.mark.parametrize("subpath", ["x ", "a/b ", " ", "a/\u00a0"])
def test_str_parse_round_trip_keeps_trailing_whitespace(subpath: str) -> None:
    ref = ResourceRef("res", subpath)
    assert ResourceRef.parse(str(ref)) == ref


# ------------------------------------------------------------------------------------ refusals

LONG_COMPONENT = "x" * 300
LONG_SUBPATH = "/".join(["abcd"] * 1000)  # 4999 bytes, every component short


@pytest.mark.parametrize(
    ("subpath", "problem"),
    [
        ("../x", "'..'"),
        ("a/../../b", "'..'"),
        ("a/..", "'..'"),
        ("..", "'..'"),
        ("a/./../b", "'..'"),
        ("/abs", "absolute"),
        ("//abs", "absolute"),
        ("C:/x", "absolute"),
        ("c:\\x", "backslash"),
        ("a\x00b", "NUL"),
        ("a\nb", "control character"),
        ("a\tb", "control character"),
        ("a\rb", "control character"),
        ("a\x1bb", "control character"),
        ("a\x7fb", "control character"),
        ("a\\b", "backslash"),
        ("..\\x", "backslash"),
        (f"a/{LONG_COMPONENT}/b", f"longer than {MAX_COMPONENT_BYTES} bytes"),
        ("ä" * 128, f"longer than {MAX_COMPONENT_BYTES} bytes"),  # 128 chars, 256 bytes
        (LONG_SUBPATH + "a", f"the limit is {MAX_SUBPATH_BYTES}"),
    ],
)
def test_bad_subpaths_are_refused(subpath: str, problem: str) -> None:
    with pytest.raises(InvalidResourceRefError) as info:
        ResourceRef("myres", subpath)
    message = str(info.value)
    assert "'myres'" in message
    assert problem in message
    assert isinstance(info.value, DwsError)
    # the same refusal through parse(), child() and normalize_subpath
    with pytest.raises(InvalidResourceRefError, match="myres"):
        ResourceRef("myres").child(subpath)
    with pytest.raises(InvalidResourceRefError):
        normalize_subpath(subpath, resource="myres")


def test_limits_are_inclusive() -> None:
    assert ResourceRef("r", "x" * MAX_COMPONENT_BYTES).subpath == "x" * MAX_COMPONENT_BYTES
    exact = "/".join(["a" * 255] * 16) + "/"
    assert len(exact.encode()) == MAX_SUBPATH_BYTES
    assert ResourceRef("r", exact).subpath == exact.rstrip("/")
    with pytest.raises(InvalidResourceRefError):
        ResourceRef("r", exact + "a")


def test_long_subpath_message_is_shortened() -> None:
    with pytest.raises(InvalidResourceRefError) as info:
        ResourceRef("myres", "a" * 5000)
    assert "5000 bytes" in str(info.value)
    assert len(str(info.value)) < 400


def test_nul_is_shown_escaped_in_message() -> None:
    with pytest.raises(InvalidResourceRefError) as info:
        ResourceRef("myres", "a\x00b")
    assert "\x00" not in str(info.value)


def test_non_string_subpath_refused() -> None:
    with pytest.raises(InvalidResourceRefError, match="'myres'.*must be a string, got int"):
        ResourceRef("myres", 5)  # type: ignore[arg-type]
    with pytest.raises(InvalidResourceRefError, match="got bytes"):
        ResourceRef("myres", b"a/b")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "name",
    ["", "a/b", "..", ".", "-x", ".hidden", "a b", " a", "a ", "a\x00", "a\\b", "x" * 129, "é"],
)
def test_bad_resource_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidResourceRefError) as info:
        ResourceRef(name)
    assert f"invalid resource name {name!r}" in str(info.value)
    with pytest.raises(InvalidResourceRefError):
        validate_resource_name(name)


@pytest.mark.parametrize("name", [None, 3, 1.5, b"abc", ["a"], ("a",)])
def test_non_string_resource_names_are_refused(name: object) -> None:
    with pytest.raises(InvalidResourceRefError, match="invalid resource name"):
        ResourceRef(name)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["a", "A1", "_x", "1", "a.b-c_d", "x" * 128, "res..x"])
def test_good_resource_names_are_accepted(name: str) -> None:
    assert validate_resource_name(name) == name
    assert ResourceRef(name).name == name


def test_resource_name_with_trailing_newline_is_refused() -> None:
    with pytest.raises(InvalidResourceRefError):
        validate_resource_name("src\n")


def test_surrogate_in_subpath_raises_invalid_ref_error() -> None:
    try:
        ResourceRef("myres", "data/\udcff.csv")
    except InvalidResourceRefError:
        pass


@pytest.mark.parametrize("text", ["", "   ", "/x", "a b/c", "-x/y", "res/../x"])
def test_parse_refuses(text: str) -> None:
    with pytest.raises(InvalidResourceRefError):
        ResourceRef.parse(text)


@pytest.mark.parametrize("value", [None, 5, object()])
def test_as_ref_refuses_non_refs(value: object) -> None:
    with pytest.raises(InvalidResourceRefError):
        as_ref(value)  # type: ignore[arg-type]


def test_as_ref_duck_types_named_refs() -> None:
    class Foreign:
        name = "res"
        subpath = "a//b/"

    assert as_ref(Foreign()) == ResourceRef("res", "a/b")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- child / ancestors


def test_child() -> None:
    root = ResourceRef("res")
    assert root.child("a") == ResourceRef("res", "a")
    assert root.child("a//b/./") == ResourceRef("res", "a/b")
    assert root.child("a").child("b/c") == ResourceRef("res", "a/b/c")
    assert root.child("") is root
    a = root.child("a")
    assert a.child(".") is a
    assert a.covers(a.child("x/y"))
    assert not a.child("x").covers(a)


@pytest.mark.parametrize("relative", ["..", "../b", "x/../..", "/abs", "a\\b", "a\x00"])
def test_child_refuses_escapes(relative: str) -> None:
    with pytest.raises(InvalidResourceRefError, match="'res'"):
        ResourceRef("res", "a/b").child(relative)


def test_child_refuses_to_grow_past_the_length_limit() -> None:
    deep = ResourceRef("res", "/".join(["a" * 200] * 20))  # 4019 bytes
    with pytest.raises(InvalidResourceRefError, match="limit"):
        deep.child("b" * 100)


def test_ancestors() -> None:
    assert R("r/a/b").ancestors() == [R("r"), R("r/a")]
    assert R("r/a").ancestors() == [R("r")]
    assert R("r").ancestors() == []
    ref = R("r/a/b/c/d")
    ancestors = ref.ancestors()
    assert [str(a) for a in ancestors] == ["r", "r/a", "r/a/b", "r/a/b/c"]
    assert all(a.covers(ref) and a != ref for a in ancestors)
    # nearest last: each one covers the next
    assert all(outer.covers(inner) for outer, inner in itertools.pairwise(ancestors))


# ---------------------------------------------------------------------------------- properties

PATHISH = st.text(
    alphabet=st.sampled_from(
        ["a", "b", "/", ".", "\\", "\x00", "\n", ":", "C", " ", "é", "\x7f", "=", "-"]
    ),
    max_size=40,
)


@settings(max_examples=400, deadline=None)
@given(sub=st.one_of(st.text(), PATHISH))
def test_property_normalised_subpaths_are_safe(sub: str) -> None:
    try:
        ref = ResourceRef("res", sub)
    except InvalidResourceRefError:
        return
    if ref.subpath is None:
        assert ref.parts == ()
        if sub:
            assert ResourceRef("res", sub + "/x") == ResourceRef("res", "x")
        return
    assert not ref.subpath.startswith("/")
    assert "\x00" not in ref.subpath
    assert "\\" not in ref.subpath
    assert not any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in ref.subpath)
    for part in ref.parts:
        assert part not in ("", ".", "..")
        assert len(part.encode()) <= MAX_COMPONENT_BYTES
    assert len(ref.subpath.encode()) <= MAX_SUBPATH_BYTES
    # normalisation is idempotent and covering agrees with child()
    assert ResourceRef("res", ref.subpath) == ref
    assert ResourceRef("res").covers(ref)
    assert not ref.covers(ref)
    assert ref.covers_or_equals(ref)
    if len(sub.encode()) + 2 <= MAX_SUBPATH_BYTES:
        inner = ResourceRef("res", sub + "/x")
        assert ref.covers(inner)
        assert not inner.covers(ref)
        assert inner == ref.child("x")
        assert inner.ancestors()[-1] == ref


COMPONENT = st.sampled_from(["x", "y", "xy", "x-y", "x.y", "é"])
VALID_REF = st.builds(
    lambda name, parts, spelled: ResourceRef(name, spelled("/".join(parts)) or None),
    st.sampled_from(["a", "b"]),
    st.lists(COMPONENT, max_size=4),
    st.sampled_from([str, lambda sub: f"./{sub}//" if sub else sub]),
)


@settings(max_examples=600, deadline=None)
@given(a=VALID_REF, b=VALID_REF)
def test_property_covers_is_the_strict_part_of_covers_or_equals(
    a: ResourceRef, b: ResourceRef
) -> None:
    assert a.covers(b) == (a.covers_or_equals(b) and a != b)
    assert a.covers_or_equals(b) == (a.covers(b) or a == b)
    assert a.overlaps(b) == b.overlaps(a)
    assert a.overlaps(b) == (a.covers_or_equals(b) or b.covers_or_equals(a))
    assert not (a.covers(b) and b.covers(a))
    if a.covers(b):
        assert a < b
        assert a in b.ancestors()
    assert (a < b) == ((a.name, a.parts) < (b.name, b.parts))
    assert (a == b) == (tuple(a) == tuple(b)) == (hash(a) == hash(b) and str(a) == str(b))
