"""Secrets out of everything dws_dagster records or prints: one module, one rule set.

`redact_text` is the one entry for free text (error messages, tracebacks, log lines, parameter
strings, anything a user or a library wrote). It works by position, not by looking values up:

* URIs lose any user-info that carries a password (`scheme://user:p@ss@host` keeps
  `scheme://host`; a password may hold a raw `@`), and a bare user name too (it is often a
  token: `https://TOKEN@github.com`), except on Azure storage schemes where it names the
  container (`abfss://container@account...`). Credential query parameters (`sig=`,
  `X-Amz-Signature=`, `token=`, ...) keep their name and lose their value.
* `key=value`, `key: value`, `"key": "value"` and flags (`--db-password VALUE`,
  `--db-password=VALUE`, `-p VALUE`, `'--token', 'VALUE'` in a list's repr) lose the value
  when the key names a credential (`is_secret_name`).
* Authorization values (`Bearer xyz`, `Basic xyz`), PEM private-key blocks and well-known
  token formats (AWS access key ids, GitHub, GitLab, Slack, Stripe, Google API keys, JWTs).

Every value removed by position is then removed wherever else it appears in the same text
(`--password hunter2 ... login hunter2 failed`), as are the `known` secrets a caller passes
(values of credential parameters, a transport's keys): a secret cannot survive because it
was repeated somewhere no rule looks. Values shorter than `MIN_REPEATED` characters are only
removed by position (replacing every `ab` would shred the text and reveal nothing).

Patterns are compiled once; the sensor redacts error texts of thousands of events.
This module imports neither dagster nor pyspark.
"""

from __future__ import annotations

import functools
import itertools
import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote

__all__ = [
    "MIN_REPEATED",
    "REDACTED",
    "RedactingFilter",
    "get_logger",
    "is_secret_name",
    "redact_command_line",
    "redact_text",
    "secret_values",
    "split_userinfo",
    "uri_credentials",
    "without_credentials",
]

REDACTED = "***REDACTED***"
#: Shortest value removed wherever it appears (shorter ones are removed where found only).
MIN_REPEATED = 3

#: Name words that mark a parameter, key or flag as a credential (whole words of the name).
_SECRET_WORDS = frozenset(
    {
        "password",
        "sslpassword",
        "passwd",
        "pass",
        "pwd",
        "passphrase",
        "secret",
        "secrets",
        "token",
        "credential",
        "credentials",
        "creds",
        "auth",
        "authorization",
        "cookie",
        "signature",
        "apikey",
        "privatekey",
        "secretkey",
        "accesskey",
        "sessionkey",
        "clientsecret",
        "authtoken",
        "accountkey",
        "sig",
        "sas",
        "jwt",
        "bearer",
    }
)
#: Further names that are credentials as URI query parameters (`?key=...` is an API key).
_QUERY_WORDS = frozenset({"key", "code", "sig"})
_NAME_WORDS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
#: Schemes whose bare user name is a container, not a credential.
AZURE_SCHEMES = frozenset({"abfs", "abfss", "wasb", "wasbs"})
#: Short flags taken for credentials (`mysql -p SECRET`, `-pSECRET`).
_SHORT_SECRET_FLAGS = frozenset({"-p"})


@functools.lru_cache(maxsize=8192)
def is_secret_name(name: str) -> bool:
    """True for names such as `password`, `db_token`, `apiKey`, `AWS_SECRET_ACCESS_KEY`,
    `--db-password`, `X-Amz-Signature`."""
    words = [w.lower() for w in _NAME_WORDS.findall(str(name))]
    if any(word in _SECRET_WORDS for word in words):
        return True
    return any(a + b in _SECRET_WORDS for a, b in itertools.pairwise(words))


def _is_secret_query_name(name: str) -> bool:
    return name.lower() in _QUERY_WORDS or is_secret_name(name)


# ----------------------------------------------------------------------------- patterns

_PEM = re.compile(
    r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END[A-Z0-9 ]*-----|\Z)", re.DOTALL
)
#: A URI up to where text around it resumes (whitespace, quotes, brackets of prose).
_URI = re.compile(
    r"(?<![A-Za-z0-9+.-])(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://"
    r"(?P<rest>[^\s'\"<>`\\]*)"
)
_PORT_AFTER_COLON = re.compile(r"\d*(?:[/?#]|$)")
_QUERY_PAIR = re.compile(r"(?P<lead>[?&;])(?P<name>[^=&#;?]+)=(?P<value>[^&#;]*)")
#: Where a credential's query value ends: SQLAlchemy and libpq split a query at `&` only, so a
#: `;` belongs to the value.
_QUERY_VALUE_END = re.compile(r"[&#]")
#: Punctuation that may end a sentence or a clause after a value (`?sig=abc, then`).
_PROSE_TAIL = re.compile(r"[,.;:!?)\]}]+\Z")
_CLOSING = {")": "(", "]": "[", "}": "{"}
#: What follows a value in a list of settings (`password=a, dbname=x`): not prose.
_NEXT_SETTING = re.compile(r"\s+[\w.-]+\s*[=:]")
_KNOWN_TOKENS = re.compile(
    "|".join(
        (
            r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA)[A-Z0-9]{16}\b",  # AWS key ids
            r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,255}\b",  # GitHub
            r"\bgithub_pat_[A-Za-z0-9_]{20,255}\b",
            r"\bglpat-[A-Za-z0-9_-]{20,}\b",  # GitLab
            r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b",  # Slack
            r"\bhooks\.slack\.com/services/[A-Za-z0-9/_-]+",
            r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}\b",  # Stripe
            r"\bsk-[A-Za-z0-9_-]{20,}\b",  # API keys
            r"\bAIza[0-9A-Za-z_-]{35}\b",  # Google
            r"\bnpm_[A-Za-z0-9]{36}\b",
            r"\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*",  # JWT
        )
    )
)
_AUTH_SCHEME = r"(?:Bearer|bearer|BEARER|Basic|basic|BASIC|Digest|Token|Bot|Negotiate|NTLM)"
_BEARER = re.compile(r"\b(?:Bearer|bearer|BEARER|Basic|BASIC)\s+(?P<value>[A-Za-z0-9._~+/=-]+)")
#: A quoted value (the quote itself may be escaped, as in JSON inside a string), or a bare one
#: (an auth scheme and its token, else up to whitespace or a quote).
_VALUE = re.compile(
    r"[bru]{0,2}\\(?P<eq>[\"'])(?P<ev>[\s\S]{0,4096}?)\\(?P=eq)"
    r"|[bru]{0,2}(?P<q>[\"'])(?P<qv>(?:\\[\s\S]|(?!(?P=q))[^\\]){0,4096})(?P=q)"
    rf"|\\?[\"']?(?P<bv>(?:{_AUTH_SCHEME}\s+)?[^\s'\"`]+)"
)
#: `key = value`, `key: value`, `"key": "value"`, `--flag=value` up to the value (the key is
#: checked by name, then the value read from there: a value that is not a secret is scanned
#: for further keys, `user=a;password=b`).
_KEY = re.compile(
    r"(?<![\w.-])(?P<kq>\\?[\"']?)(?P<key>-{0,2}[A-Za-z_][\w.-]*)(?P=kq)"
    r"[ \t]*(?:=>?[ \t]*|:[ \t]*(?!//))"
)
#: `--flag value` and `'--flag', 'value'` (a list's repr, as in subprocess errors).
_FLAG = re.compile(
    r"(?<![\w.-])(?P<kq>\\?[\"']?)(?P<key>--?[A-Za-z][\w.-]*)"
    r"(?:(?P=kq)\s*,\s*|\s+)(?!-)"
)


# ----------------------------------------------------------------------------- public API


def redact_text(text: str, known: Iterable[str] = ()) -> str:
    """`text` with every credential the rules find, and every `known` secret, replaced by
    `***REDACTED***` (see the module docstring)."""
    if not isinstance(text, str):
        text = str(text)
    found: set[str] = set()
    out = _redact_positions(text, found)
    return _redact_repeats(out, found.union(known))


def redact_command_line(
    argv: Iterable[str], known: Iterable[str] = (), *, found: set[str] | None = None
) -> list[str]:
    """A command line to record: the value after (or attached to) a credential flag is
    redacted (`--db-password VALUE`, `--db-password=VALUE`, `-p VALUE`, `-pVALUE`), every
    argument goes through `redact_text`, and a redacted value is removed from every argument
    it appears in. The values removed are added to `found`, to be removed from the step's
    error texts too."""
    if found is None:
        found = set()
    out: list[str] = []
    hide_next = False
    for arg in (str(a) for a in argv):
        if hide_next:
            found.add(arg)
            out.append(REDACTED)
            hide_next = False
            continue
        if arg.startswith("-") and len(arg) > 1 and arg != "--":
            name, eq, value = arg.partition("=")
            # `-pVALUE` unless the whole is a credential word (`-password`, `-pwd`): else
            # a value could pass for a flag name and stay
            attached = (
                arg[:2] in _SHORT_SECRET_FLAGS
                and len(arg) > 2
                and arg[1:].lower() not in _SECRET_WORDS
            )
            if attached:
                sep = "=" if arg[2] == "=" else ""
                found.add(arg[2 + len(sep) :])
                out.append(f"{arg[:2]}{sep}{REDACTED}")
                continue
            if is_secret_name(name) or name in _SHORT_SECRET_FLAGS:
                if eq:
                    found.add(value)
                    out.append(f"{name}={REDACTED}")
                else:
                    out.append(name)
                    hide_next = True
                continue
        out.append(_redact_positions(arg, found))
    secrets = found.union(known)
    return [_redact_repeats(arg, secrets) for arg in out]


def secret_values(value: Any) -> set[str]:
    """String values held under credential-like names anywhere in `value` (a mapping of
    parameters or a run's config), to be removed from texts of the same step."""
    found: set[str] = set()
    _collect_secret_values(value, False, found, 0)
    return found


def uri_credentials(uri: str) -> str | None:
    """What credential a URI carries, in words that do not repeat it, or None.

    A password in the user-info, or a credential query parameter; a user name alone is not
    a credential (`abfss://container@account.dfs.core.windows.net/lake`)."""
    match = _URI.match(uri.strip())
    if match is None:
        return None
    rest = match.group("rest")
    userinfo, _host = split_userinfo(rest)
    if userinfo is not None and ":" in userinfo:
        return "a password in its user-info, user:password@"
    for pair in _QUERY_PAIR.finditer(rest):
        if _is_secret_query_name(unquote(pair.group("name"))):
            return f"the credential query parameter '{_safe_name(pair.group('name'))}'"
    return None


def without_credentials(uri: str) -> str:
    """`uri` with its user-info dropped, except an Azure container name
    (`abfss://container@account...`, also when a password follows it); the query is kept."""
    match = _URI.match(uri)
    if match is None or match.end() != len(uri):
        return uri
    scheme = match.group("scheme")
    userinfo, after = split_userinfo(match.group("rest"))
    if userinfo is None:
        return uri
    user = userinfo.partition(":")[0]
    if scheme.lower() in AZURE_SCHEMES and user:
        return f"{scheme}://{user}@{after}"
    return f"{scheme}://{after}"


# ----------------------------------------------------------------------------- logging


class RedactingFilter(logging.Filter):
    """Redacts a log record's message (arguments merged in) before any handler sees it."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: let logging report it as it would
            return True
        clean = redact_text(message)
        if clean != message or record.args:
            record.msg, record.args = clean, ()
        if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
            record.exc_text = redact_text(logging.Formatter().formatException(record.exc_info))
        return True


_FILTER = RedactingFilter()


def get_logger(name: str) -> logging.Logger:
    """A dws_dagster logger whose records are redacted (a logger's filters do not apply to
    its children's records, so each module's logger gets the filter)."""
    logger = logging.getLogger(name)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
    return logger


# ----------------------------------------------------------------------------- internals


def _redact_positions(text: str, found: set[str]) -> str:
    out = text
    if "PRIVATE KEY" in out:
        out = _PEM.sub(lambda m: _hide(m.group(0), found), out)
    if "://" in out:
        out = _URI.sub(lambda m: _redact_uri_match(m, found), out)
    out = _KNOWN_TOKENS.sub(lambda m: _hide(m.group(0), found), out)
    out = _BEARER.sub(lambda m: _hide_group(m, "value", found), out)
    if "=" in out or ":" in out:
        out = _redact_pairs(_KEY, out, found)
    if "-" in out:
        out = _redact_pairs(_FLAG, out, found)
    return out


def _redact_repeats(text: str, secrets: Iterable[str]) -> str:
    candidates = {
        s for s in secrets if isinstance(s, str) and len(s) >= MIN_REPEATED and s not in REDACTED
    }
    variants = set(candidates)
    for secret in candidates:
        variants.add(unquote(secret))
    variants = {v for v in variants if len(v) >= MIN_REPEATED and v not in REDACTED}
    for secret in sorted(variants, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def _hide(value: str, found: set[str]) -> str:
    if REDACTED not in value:
        found.add(value)
    return REDACTED


def _hide_group(match: re.Match[str], group: str, found: set[str]) -> str:
    start, end = match.span(group)
    base = match.start()
    whole = match.group(0)
    return whole[: start - base] + _hide(match.group(group), found) + whole[end - base :]


def _redact_pairs(keys: re.Pattern[str], text: str, found: set[str]) -> str:
    """Values after credential keys (`keys` matches a key and its separator) redacted."""
    parts: list[str] = []
    done = pos = 0
    while (match := keys.search(text, pos)) is not None:
        pos = match.end()
        key = match.group("key")
        if not is_secret_name(key) and key not in _SHORT_SECRET_FLAGS:
            continue
        value = _VALUE.match(text, pos)
        if value is None:
            continue
        group = next(g for g in ("ev", "qv", "bv") if value.group(g) is not None)
        start, end = value.span(group)
        if group == "bv":
            end -= _prose_tail(value.group(group), text, end)
        if not text.startswith(REDACTED, start):
            parts += [text[done:start], _hide(text[start:end], found)]
            done = end
        pos = max(value.end(), pos + 1)
    if not parts:
        return text
    parts.append(text[done:])
    return "".join(parts)


def split_userinfo(rest: str) -> tuple[str | None, str]:
    """(user-info or None, the rest after it) of what follows `scheme://`.

    The authority ends at the first `/`, `?` or `#`; its user-info runs to its last `@` (a
    password may hold a raw `@`). Some parsers (SQLAlchemy's) also take a raw `/` in a
    password: `user:pa/ss@host` counts as user-info when the colon is not followed by a
    port and no `?` or `#` comes before the `@`. (A password holding both a raw `/` and a raw
    `@` cannot be told from a path; percent-encode it, as RFC 3986 asks.)"""
    end = len(rest)
    for sep in "/?#":
        at = rest.find(sep)
        if at != -1 and at < end:
            end = at
    authority = rest[:end]
    at = authority.rfind("@")
    if at != -1:
        return authority[:at], rest[at + 1 :]
    colon = authority.find(":")
    if colon == -1 or authority.startswith("[") or _PORT_AFTER_COLON.match(rest, colon + 1):
        return None, rest
    at = rest.find("@", colon)
    if at == -1 or "?" in rest[colon:at] or "#" in rest[colon:at]:
        return None, rest
    return rest[:at], rest[at + 1 :]


def _prose_tail(value: str, text: str, end: int) -> int:
    """How many characters at the end of `value` (which ends at `text[end]`) are punctuation of
    the sentence around it rather than part of it: `,` `.` `;` `:` `!` `?` and closing brackets
    the value did not open, when prose resumes after a space (`token=abc, retrying`,
    `(see https://h/x?sig=abc) and`). Anything else stays in the value, to be redacted with it:
    at the end of a text, before another setting (`password=ab, dbname=x`) or inside a value
    (`token=x,y`), a comma cannot be told from the secret's own."""
    if end >= len(text) or not text[end].isspace() or _NEXT_SETTING.match(text, end):
        return 0
    tail = _PROSE_TAIL.search(value)
    if tail is None or tail.start() == 0:
        return 0
    start = tail.start()
    for index in range(tail.start(), len(value)):
        opener = _CLOSING.get(value[index])
        if opener is not None and value.count(opener, 0, index) > value.count(
            value[index], 0, index
        ):
            start = index + 1  # closes a bracket the value opened: part of it
    return len(value) - start


def _redact_uri_match(match: re.Match[str], found: set[str]) -> str:
    scheme, whole = match.group("scheme"), match.group("rest")
    # A URI ends before the punctuation of the sentence it is in (`see https://h/x?sig=abc, and`)
    cut = len(whole) - _prose_tail(whole, match.string, match.end())
    rest, prose = whole[:cut], whole[cut:]
    userinfo, after = split_userinfo(rest)
    if userinfo is not None:
        _user, colon, password = userinfo.partition(":")
        if colon:
            for value in (password, userinfo):
                if REDACTED not in value:
                    found.add(value)
        if colon or scheme.lower() not in AZURE_SCHEMES:
            rest = after  # the whole user-info goes: the user name may be a token too
    if "=" in rest:
        rest = _redact_query(rest, found)
    return f"{scheme}://{rest}{prose}"


def _redact_query(rest: str, found: set[str]) -> str:
    """`rest` (after `scheme://`) with the value of each credential query parameter redacted:
    to the next `&` or `#` (a `;` in it is part of it, as SQLAlchemy and libpq read it). A
    parameter whose value holds another query (`?next=https://h/?token=x`) is looked into."""
    parts: list[str] = []
    done = pos = 0
    while (match := _QUERY_PAIR.search(rest, pos)) is not None:
        start = match.start("value")
        if not _is_secret_query_name(unquote(match.group("name"))):
            pos = start
            continue
        ends = _QUERY_VALUE_END.search(rest, start)
        end = len(rest) if ends is None else ends.start()
        if end > start and not rest.startswith(REDACTED, start):
            parts += [rest[done:start], _hide(rest[start:end], found)]
            done = end
        pos = max(end, start + 1)
    if not parts:
        return rest
    parts.append(rest[done:])
    return "".join(parts)


def _safe_name(name: str) -> str:
    return name if len(name) <= 40 else name[:40] + "..."


def _collect_secret_values(value: Any, secret: bool, found: set[str], depth: int) -> None:
    if depth > 64:
        return
    if isinstance(value, str):
        if secret and value and REDACTED not in value:
            found.add(value)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _collect_secret_values(item, secret or is_secret_name(str(key)), found, depth + 1)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            _collect_secret_values(item, secret, found, depth + 1)
