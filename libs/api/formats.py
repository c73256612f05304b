"""String formats of the Kubernetes API (names, label keys and values), each returning the API server's
messages for a bad value, or no message when the value is fine."""

from __future__ import annotations

import re
from typing import Final

DNS1123_LABEL_MAX_LENGTH: Final = 63
DNS1123_SUBDOMAIN_MAX_LENGTH: Final = 253
LABEL_NAME_MAX_LENGTH: Final = 63
LABEL_VALUE_MAX_LENGTH: Final = 63

_DNS1123_LABEL_FMT: Final = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT: Final = _DNS1123_LABEL_FMT + r"(\." + _DNS1123_LABEL_FMT + ")*"
_LABEL_NAME_FMT: Final = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT: Final = "(" + _LABEL_NAME_FMT + ")?"
_C_IDENTIFIER_FMT: Final = "[A-Za-z_][A-Za-z0-9_]*"

_DNS1123_LABEL_RE: Final = re.compile(f"^{_DNS1123_LABEL_FMT}$")
_DNS1123_SUBDOMAIN_RE: Final = re.compile(f"^{_DNS1123_SUBDOMAIN_FMT}$")
_LABEL_NAME_RE: Final = re.compile(f"^{_LABEL_NAME_FMT}$")
_LABEL_VALUE_RE: Final = re.compile(f"^{_LABEL_VALUE_FMT}$")
_C_IDENTIFIER_RE: Final = re.compile(f"^{_C_IDENTIFIER_FMT}$")

_DNS1123_LABEL_MSG: Final = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
# The documented API fixes this sentence without the "(e.g. ..., regex used ...)" tail the Go code appends.
DNS1123_SUBDOMAIN_MSG: Final = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)
_LABEL_NAME_MSG: Final = (
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_LABEL_VALUE_MSG: Final = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_C_IDENTIFIER_MSG: Final = (
    "a valid C identifier must start with alphabetic character or '_', "
    "followed by a string of alphanumeric characters or '_'"
)


# Values already found well-formed, per format: names, namespaces and label keys repeat from object to object.
_VALID_CACHE_SIZE: Final = 4096
_VALID_DNS1123_LABEL: Final[set[str]] = set()
_VALID_DNS1123_SUBDOMAIN: Final[set[str]] = set()
_VALID_LABEL_KEY: Final[set[str]] = set()
_VALID_LABEL_VALUE: Final[set[str]] = set()


def _remember_valid(cache: set[str], value: str) -> None:
    if type(value) is not str:  # only plain strings: a str subclass could compare unlike itself
        return
    if len(cache) >= _VALID_CACHE_SIZE:
        cache.clear()
    cache.add(value)


def regex_error(message: str, fmt: str, *examples: str) -> str:
    """`validation.RegexError`: the message, some examples and the regex, spaced exactly as Go does."""
    if not examples:
        return f"{message} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{fmt}')"


def max_len_error(length: int) -> str:
    """`validation.MaxLenError`."""
    return f"must be no more than {length} characters"


def empty_error() -> str:
    """`validation.EmptyError`."""
    return "must be non-empty"


def dns1123_label_errors(value: str) -> list[str]:
    """Messages for a value that is not an RFC 1123 label (DNS label: template, container, request names)."""
    if value in _VALID_DNS1123_LABEL:
        return []
    errors = _dns1123_label_errors(value)
    if not errors:
        _remember_valid(_VALID_DNS1123_LABEL, value)
    return errors


def _dns1123_label_errors(value: str) -> list[str]:
    errors = []
    if len(value) > DNS1123_LABEL_MAX_LENGTH:
        errors.append(max_len_error(DNS1123_LABEL_MAX_LENGTH))
    if not _DNS1123_LABEL_RE.match(value):
        if _DNS1123_SUBDOMAIN_RE.match(value):
            errors.append("must not contain dots")
        else:
            errors.append(regex_error(_DNS1123_LABEL_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errors


def dns1123_subdomain_errors(value: str) -> list[str]:
    """Messages for a value that is not an RFC 1123 subdomain (object names, class names)."""
    if value in _VALID_DNS1123_SUBDOMAIN:
        return []
    errors = _dns1123_subdomain_errors(value)
    if not errors:
        _remember_valid(_VALID_DNS1123_SUBDOMAIN, value)
    return errors


def _dns1123_subdomain_errors(value: str) -> list[str]:
    errors = []
    if len(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        errors.append(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH))
    if not _DNS1123_SUBDOMAIN_RE.match(value):
        errors.append(DNS1123_SUBDOMAIN_MSG)
    return errors


def label_key_errors(value: str) -> list[str]:
    """Messages for a value that is not a label key (`[prefix/]name`), as `content.IsLabelKey`."""
    if value in _VALID_LABEL_KEY:
        return []
    errors = _label_key_errors(value)
    if not errors:
        _remember_valid(_VALID_LABEL_KEY, value)
    return errors


def _label_key_errors(value: str) -> list[str]:
    parts = value.split("/")
    if len(parts) > 2:
        return [
            "a valid label key "
            + regex_error(_LABEL_NAME_MSG, _LABEL_NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    errors = []
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part " + empty_error())
        else:
            errors.extend("prefix part " + message for message in dns1123_subdomain_errors(prefix))
    name = parts[-1]
    if not name:
        errors.append("name part " + empty_error())
    elif len(name) > LABEL_NAME_MAX_LENGTH:
        errors.append("name part " + max_len_error(LABEL_NAME_MAX_LENGTH))
    if not _LABEL_NAME_RE.match(name):
        errors.append(
            "name part " + regex_error(_LABEL_NAME_MSG, _LABEL_NAME_FMT, "MyName", "my.name", "123-abc")
        )
    return errors


def label_value_errors(value: str) -> list[str]:
    """Messages for a value that is not a label value."""
    if value in _VALID_LABEL_VALUE:
        return []
    errors = _label_value_errors(value)
    if not errors:
        _remember_valid(_VALID_LABEL_VALUE, value)
    return errors


def _label_value_errors(value: str) -> list[str]:
    errors = []
    if len(value) > LABEL_VALUE_MAX_LENGTH:
        errors.append(max_len_error(LABEL_VALUE_MAX_LENGTH))
    if not _LABEL_VALUE_RE.match(value):
        errors.append(regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errors


def path_segment_name_errors(value: str) -> list[str]:
    """Messages for a name that cannot be a URL path segment (controller references)."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{char}'" for char in "/%" if char in value]


def c_identifier_errors(value: str) -> list[str]:
    """Messages for a value that is not a C identifier (device attribute names)."""
    if _C_IDENTIFIER_RE.match(value):
        return []
    return [regex_error(_C_IDENTIFIER_MSG, _C_IDENTIFIER_FMT, "my_name", "MY_NAME", "MyName")]
