"""ResourceRef: covering, normalisation, refusals, child/ancestors, and a property test."""

from __future__ import annotations

import itertools

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
    # (outer, inner, outer covers inner)
    ("bar", "bar", True),
    ("bar/b", "bar/b", True),
    ("bar/b/c", "bar/b/c", True),
    ("bar", "bar/b", True),
    ("bar", "bar/b/c/d", True),
    ("bar", "bar/baz", True),
    ("bar/b", "bar/b/c", True),
    ("bar/b", "bar/b/c/d/e", True),
    ("bar/b", "bar/baz", False),
    ("bar/b", "bar/bc", False),
    ("bar/b", "bar", False),
    ("bar/b/c", "bar/b", False),
    ("bar/b", "bar/a/b", False),
    ("bar/b", "bar/c", False),
    ("bar/date=1", "bar/date=10", False),
    ("bar", "baz", False),
    ("bar", "bars", False),
    ("bar", "ba", False),
    ("bar/b", "baz/b", False),
    ("bar/b", "baz/b/c", False),
    ("src", "inter", False),
]


@pytest.mark.parametrize(("outer", "inner", "expected"), COVERS_TABLE)
def test_covers_truth_table(outer: str, inner: str, expected: bool) -> None:
    assert R(outer).covers(R(inner)) is expected


@pytest.mark.parametrize(("a", "b", "_covers"), COVERS_TABLE)
def test_overlaps_is_symmetric_and_means_one_covers_the_other(a: str, b: str,
                                                              _covers: bool) -> None:
    ra, rb = R(a), R(b)
    assert ra.overlaps(rb) is rb.overlaps(ra)
    assert ra.overlaps(rb) is (ra.covers(rb) or rb.covers(ra))


def test_overlaps_examples() -> None:
    assert R("bar/b").overlaps(R("bar/b/c"))
    assert R("bar/b/c").overlaps(R("bar/b"))
    assert not R("bar/b").overlaps(R("bar/bc"))
    assert not R("bar/bc").overlaps(R("bar/b"))
    assert not R("bar").overlaps(R("baz"))


def test_covers_uses_normalised_subpaths() -> None:
    assert ResourceRef("bar", "b/").covers(ResourceRef("bar", "./b//c/"))
    assert ResourceRef("bar", ".").covers(ResourceRef("bar", "anything"))
    assert not ResourceRef("bar", "b/").covers(ResourceRef("bar", "bc"))


# ------------------------------------------------------------------------------- normalisation

@pytest.mark.parametrize(("raw", "expected"), [
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
])
def test_normalisation(raw: str | None, expected: str | None) -> None:
    assert ResourceRef("res", raw).subpath == expected
    assert normalize_subpath(raw) == expected


def test_root_and_dot_subpath_equal_plain_resource() -> None:
    assert ResourceRef("res", "") == ResourceRef("res", ".") == ResourceRef("res")
    assert str(ResourceRef("res", ".")) == "res"
    assert ResourceRef("res", "").parts == ()


@pytest.mark.parametrize("text", ["res", "res/a", "res/a/b/c", "res/date=2024-01-01/x.csv",
                                  "r_1.x-y/ä ö/ü", "res/...", "res/.hidden/x"])
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


@pytest.mark.parametrize(("subpath", "problem"), [
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
])
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


@pytest.mark.parametrize("name", ["", "a/b", "..", ".", "-x", ".hidden", "a b", " a", "a ",
                                  "a\x00", "a\\b", "x" * 129, "é"])
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

PATHISH = st.text(alphabet=st.sampled_from(["a", "b", "/", ".", "\\", "\x00", "\n", ":",
                                            "C", " ", "é", "\x7f", "=", "-"]), max_size=40)


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
    assert ref.covers(ref)
    if len(sub.encode()) + 2 <= MAX_SUBPATH_BYTES:
        inner = ResourceRef("res", sub + "/x")
        assert ref.covers(inner)
        assert not inner.covers(ref)
        assert inner == ref.child("x")
        assert inner.ancestors()[-1] == ref
