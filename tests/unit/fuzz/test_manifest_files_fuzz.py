"""Property-based fuzzing of manifest files as bytes: whatever a file holds (bytes that are not UTF-8, keys
set twice, comments only), reading it answers documents or a ManifestError a user can read, never a codec
or parser traceback."""

from __future__ import annotations

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from libs.api.manifests import ManifestError, decode_manifest, load_documents
from tests.unit.fuzz.test_manifests_fuzz import KINDS, SEEDS


def _read(data: bytes) -> list[dict] | ManifestError:
    try:
        return load_documents(decode_manifest(data))
    except ManifestError as refused:
        return refused


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=400))
def test_any_bytes_are_read_or_refused_with_a_manifest_error(data: bytes) -> None:
    answer = _read(data)  # any other exception fails the test
    assert isinstance(answer, list) or str(answer)


@settings(max_examples=200, deadline=None)
@given(
    kind=st.sampled_from(KINDS),
    prefix=st.binary(max_size=40),
    bad=st.sampled_from([b"\xff", b"\xc3(", b"\xed\xa0\x80"]),
)
def test_a_byte_that_is_not_utf8_is_refused_at_its_offset(kind: str, prefix: bytes, bad: bytes) -> None:
    text = yaml.safe_dump(SEEDS[kind]).encode()
    clean = prefix.decode("utf-8", errors="ignore").encode()
    data = clean + bad + text

    answer = _read(data)

    assert isinstance(answer, ManifestError)
    assert str(answer) == f"invalid UTF-8 at byte {len(clean)}"


@settings(max_examples=200, deadline=None)
@given(kind=st.sampled_from(KINDS), data=st.data())
def test_a_top_level_key_written_twice_is_refused_naming_its_line(kind: str, data: st.DataObject) -> None:
    document = yaml.safe_dump(SEEDS[kind], sort_keys=False, width=10**6)
    top = [line for line in document.splitlines() if line and not line.startswith((" ", "-"))]
    repeated = data.draw(st.sampled_from(top))
    text = document + repeated + "\n"

    answer = _read(text.encode())

    assert isinstance(answer, ManifestError)
    key = repeated.split(":", 1)[0]
    line = len(document.splitlines()) + 1
    assert str(answer).endswith(f'  line {line}: key "{key}" already set in map')


@given(st.lists(st.sampled_from(["# a comment", "", "---", "   ", "#---"]), max_size=8))
def test_a_file_of_comments_and_separators_holds_no_documents(lines: list[str]) -> None:
    assert _read("\n".join(lines).encode()) == []
