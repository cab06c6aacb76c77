"""No secret reaches a stored file, an OpenLineage event, a log or CLI output (issue 17, class 2).

The rules of `redact_text` and `redact_command_line` on their own (examples and properties with
secrets in every position: URI user-info and query, key=value in every quoting, flags in every
form, authorization values, well-known key formats, repeated and overlapping values), then the
script API end to end: real steps in a real workspace, whose command line, parameters and error
carry secrets, and every byte under the workspace, the OpenLineage file and the CLI's output
searched for them. The Dagster side is in test_redaction_dagster.py.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import string
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from dws_dagster import LineageBuilder, Workspace
from dws_dagster.ol.naming import dataset_name
from dws_dagster.workspace.records import StepInfo, sanitize_parameters
from dws_dagster.workspace.redaction import (
    REDACTED,
    get_logger,
    is_secret_name,
    redact_command_line,
    redact_text,
    secret_values,
    uri_credentials,
)
from tests.conftest import ROOT, STORE_DATABASE, run_python, write
from tests.support.store_db import damage, sql

SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

#: Characters a secret is drawn from: what passwords and tokens hold in practice, including
#: `@`, `:` and `%` that URI parsers trip on. Whitespace and quotes end a bare value in free
#: text, so they are left out (a quoted value may hold them: tested separately).
SECRET_CHARS = string.ascii_letters + string.digits + "!$%()*+,.;=@:_~^[]{}|-"


def _random_text(alphabet: str) -> st.SearchStrategy[str]:
    """Text drawn character by character. `st.text` also draws whole strings from the
    constants of the loaded code (Hypothesis >= 6.1xx), such as the store's column name
    `last_error`, which rightly appear in the workspace's files: as a secret, such a string
    would be found everywhere without anything having leaked. A secret is random."""
    return st.lists(st.sampled_from(alphabet), min_size=8, max_size=24).map("".join)


secrets_st = _random_text(SECRET_CHARS).filter(
    lambda s: not s.startswith("-") and REDACTED not in s and s not in REDACTED
)
#: URI passwords: as above without `/?#` (RFC 3986 requires them percent-encoded).
uri_secrets = _random_text(string.ascii_letters + string.digits + "!$%()*+,.;=@:_~-").filter(
    lambda s: REDACTED not in s and s not in REDACTED  # e.g. "REDACTED": the mask itself
)
hosts = st.sampled_from(
    [
        "db.example.com",
        "10.0.0.7:5432",
        "bucket",
        "host",
        "[::1]:8080",
        "account.dfs.core.windows.net",
    ]
)
schemes = st.sampled_from(
    [
        "postgresql",
        "mysql",
        "https",
        "s3a",
        "s3",
        "gs",
        "abfss",
        "wasbs",
        "hdfs",
        "mongodb+srv",
        "redis",
        "ftp",
        "jdbc:postgresql",
    ]
)
users = st.text(string.ascii_letters + string.digits + "._-", min_size=1, max_size=12)
secret_keys = st.sampled_from(
    [
        "password",
        "db_password",
        "DB_PASSWORD",
        "dbPassword",
        "passwd",
        "pwd",
        "api_key",
        "apiKey",
        "token",
        "access_token",
        "auth_token",
        "secret",
        "client_secret",
        "aws_secret_access_key",
        "AWS_SECRET_ACCESS_KEY",
        "private_key",
        "credentials",
        "Authorization",
        "X-Amz-Signature",
        "AccountKey",
        "sas_token",
        "cookie",
    ]
)
query_keys = st.sampled_from(
    [
        "sig",
        "X-Amz-Signature",
        "X-Amz-Credential",
        "X-Amz-Security-Token",
        "token",
        "access_token",
        "password",
        "api_key",
        "key",
        "X-Goog-Signature",
        "Signature",
        "AWSAccessKeyId",
        "code",
    ]
)
prose = st.sampled_from(
    [
        "",
        "error: ",
        "connecting to ",
        "Traceback (most recent call last):\n  ",
        "failed (",
        "{'a': 1, ",
        "[",
        "value ",
    ]
)


def clean(text: str, *secrets: str) -> str:
    out = redact_text(text)
    for secret in secrets:
        assert secret not in out, f"{secret!r} survived in {out!r} (from {text!r})"
    return out


# --------------------------------------------------------------------------- free text


@pytest.mark.parametrize(
    ("text", "secret", "kept"),
    [
        ("postgresql://user:p@ss@host/db failed", "p@ss", "postgresql://host/db"),
        ("postgresql://user:pa/ss@host/db", "pa/ss", "postgresql://host/db"),
        ("could not reach s3a://AKIA:wJalr@bucket/x", "wJalr", "s3a://bucket/x"),
        ("https://ghp_tok@github.com/o/r.git", "ghp_tok", "https://github.com/o/r.git"),
        (
            "GET https://acct.blob.core.windows.net/c/x?sv=2022&sig=abc%2Bdef&se=1",
            "abc%2Bdef",
            "sv=2022&",
        ),
        (
            "https://s3.amazonaws.com/b/k?X-Amz-Credential=AKIAXX%2F2024&X-Amz-Signature=f00ba4",
            "f00ba4",
            "https://s3.amazonaws.com/b/k?",
        ),
        ("https://h/x?X-Amz-Security-Token=FwoGZXIvY", "FwoGZXIvY", "https://h/x"),
        ("jdbc:postgresql://h/db?user=bob&password=hunter2", "hunter2", "user=bob"),
        ("password=hunter2 and later hunter2 again", "hunter2", "and later"),
        ("token: abcdef123", "abcdef123", "token: "),
        ('{"api_key": "k-1234567", "n": 1}', "k-1234567", '"n": 1'),
        ("{'password': 'it\\'s a secret'}", "s a secret", "{'password': "),
        ('config {\\"password\\": \\"s3cret\\"}', "s3cret", "config"),
        ('password="with spaces inside"', "with spaces inside", "password="),
        ("Authorization: Bearer eyabc.def-ghi", "eyabc.def-ghi", "Authorization:"),
        ("headers={'Authorization': 'Basic dXNlcjpwYXNz'}", "dXNlcjpwYXNz", "headers="),
        ("sent Bearer abc123xyz to the API", "abc123xyz", "sent"),
        ("Command '['psql', '--db-password', 'hunter22']' returned 2", "hunter22", "psql"),
        ("run with --db-password hunter22 --verbose", "hunter22", "--verbose"),
        ("run with --db-password=hunter22", "hunter22", "run with"),
        ("mysql -u root -p hunter22 db", "hunter22", "-u root"),
        (
            "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=Zm9vYmFy==;EndpointSuffix=x",
            "Zm9vYmFy==",
            "AccountName=a",
        ),
        ("user=bob;password=hunter2;host=h", "hunter2", "user=bob"),
        ("key AKIAIOSFODNN7EXAMPLE used", "AKIAIOSFODNN7EXAMPLE", "used"),
        ("gh ghp_" + "a1" * 18 + " leaked", "a1" * 18, "leaked"),
        ("slack xoxb-1234567890-abcdefghij", "xoxb-1234567890-abcdefghij", "slack"),
        (
            "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sflKxwRJSMeKKF2QT4fw",
            "sflKxwRJSMeKKF2QT4fw",
            "jwt",
        ),
        (
            "key: -----BEGIN RSA PRIVATE KEY-----\nMIIEow\nIBAAK\n"
            "-----END RSA PRIVATE KEY----- end",
            "MIIEow",
            "end",
        ),
        ("truncated -----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNz", "b3BlbnNz", "truncated"),
        (
            "AIzaSyA-1234567890abcdefghijklmnopqrstu key",
            "AIzaSyA-1234567890abcdefghijklmnopqrstu",
            "key",
        ),
    ],
)
def test_credentials_in_free_text_are_redacted(text: str, secret: str, kept: str) -> None:
    assert kept in clean(text, secret)


@pytest.mark.parametrize(
    "text",
    [
        'Traceback (most recent call last):\n  File "/srv/app/steps.py", line 12, in train\n'
        '    raise ValueError(f"no rows in {path}")\nValueError: no rows in /data/x.csv',
        "hdfs://namenode:8020/lake/trips@2024/part-0",
        "abfss://container@account.dfs.core.windows.net/lake",
        "s3a://bucket/lake/prep?versionId=3",
        "KeyError: 'password'",
        "step 'train': input ref inter/prep has version 1a2b3c, expected 4d5e6f",
        "asset 'hourly' (intermediate-data/hourly): the key column is missing",
        "python -m pip install -r requirements.txt",
    ],
)
def test_text_without_credentials_is_left_alone(text: str) -> None:
    assert redact_text(text) == text


def test_a_user_name_alone_is_kept_only_where_it_names_a_container() -> None:
    assert (
        redact_text("wasbs://box@acct.blob.core.windows.net/x")
        == "wasbs://box@acct.blob.core.windows.net/x"
    )
    assert (
        redact_text("abfss://box:key123@acct.dfs.core.windows.net/x")
        == "abfss://acct.dfs.core.windows.net/x"
    )
    assert redact_text("https://tokenvalue@github.com/x") == "https://github.com/x"


@SETTINGS
@given(
    scheme=schemes,
    user=users,
    secret=uri_secrets,
    host=hosts,
    lead=prose,
    repeat=st.booleans(),
    path=st.sampled_from(["", "/", "/db", "/a/b?x=1", "/k#frag"]),
)
def test_uri_passwords_never_survive(
    scheme: str, user: str, secret: str, host: str, lead: str, repeat: bool, path: str
) -> None:
    assume(secret not in f"{lead}{scheme}://{user}:@{host}{path}")
    uri = f"{scheme}://{user}:{secret}@{host}{path}"
    text = f"{lead}{uri} failed" + (f"; retried with {secret}" if repeat else "")
    out = clean(text, secret)
    assert host.split(":")[0].strip("[]") in out  # where it failed is still said


@SETTINGS
@given(
    scheme=schemes,
    host=hosts,
    name=query_keys,
    secret=uri_secrets.filter(lambda s: "&" not in s and ";" not in s and "#" not in s),
    before=st.booleans(),
    after=st.booleans(),
)
def test_credential_query_values_never_survive(
    scheme: str, host: str, name: str, secret: str, before: bool, after: bool
) -> None:
    query = "&".join(
        [
            *(["sv=2022-11-02"] if before else []),
            f"{name}={secret}",
            *(["se=2030"] if after else []),
        ]
    )
    assume(secret not in f"{scheme}://{host}/p?" + query.replace(secret, ""))
    out = clean(f"GET {scheme}://{host}/p?{query} -> 403", secret)
    assert f"{name}={REDACTED}" in out
    if before:
        assert "sv=2022-11-02" in out


@SETTINGS
@given(key=secret_keys, secret=secrets_st, lead=prose, data=st.data())
def test_key_value_pairs_never_survive(key: str, secret: str, lead: str, data) -> None:
    form = data.draw(
        st.sampled_from(
            [
                "{k}={v}",
                "{k}: {v}",
                "{k} = {v}",
                '"{k}": "{v}"',
                "'{k}': '{v}'",
                '{k}="{v}"',
                "{k}='{v}'",
                '\\"{k}\\": \\"{v}\\"',
                "--{k}={v}",
                "--{k} {v}",
                "'--{k}', '{v}'",
                "{k}=>{v}",
                "{k}: b'{v}'",
            ]
        )
    )
    text = (
        lead
        + form.format(k=key, v=secret)
        + data.draw(st.sampled_from(["", " and more", ", other=1", "\n", "}"]))
    )
    assume(secret not in lead and secret not in key)
    clean(text, secret)


@SETTINGS
@given(
    key=secret_keys,
    secret=st.text(min_size=8, max_size=30).filter(
        lambda s: '"' not in s and "\\" not in s and REDACTED not in s
    ),
)
def test_quoted_values_of_any_characters_never_survive(key: str, secret: str) -> None:
    assume(secret.strip() and secret not in key)
    clean(json.dumps({key: secret, "rows": 3}), secret)
    clean(f'failed: {key}="{secret}"', secret)


@SETTINGS
@given(
    secret=secrets_st,
    key=secret_keys,
    other=st.sampled_from(["user", "note", "--comment", "host", "retry"]),
)
def test_a_value_found_once_is_removed_wherever_it_is_repeated(
    secret: str, key: str, other: str
) -> None:
    """`--user S --password S`: the value is removed also where no rule would look."""
    assume(secret not in key and secret not in other)
    clean(f"{other} {secret} then {key}={secret} then {other}:{secret}!", secret)


@SETTINGS
@given(secret=secrets_st, key=secret_keys)
def test_a_secret_overlapping_its_key_is_still_removed(secret: str, key: str) -> None:
    """Values that contain the key, or repeat it, or are repeated back to back: redacting the
    key's value must never leave the value (or the secret) behind."""
    for value in (key + secret, secret + key, secret + secret, key, key * 2):
        assume(len(value) >= 8)
        out = redact_text(f"{key}={value} {key}={value}")
        assert value not in out


@SETTINGS
@given(text=st.text(max_size=200))
def test_redaction_is_idempotent_and_never_fails(text: str) -> None:
    once = redact_text(text)
    assert redact_text(once) == once


@pytest.mark.parametrize(
    "name",
    [
        "password",
        "db_password",
        "apiKey",
        "AWS_SECRET_ACCESS_KEY",
        "--db-password",
        "X-Amz-Signature",
        "sas_token",
        "AccountKey",
    ],
)
def test_credential_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "passenger_count",
        "tokenizer",
        "keyword",
        "author",
        "user",
        "partition_key",
        "monkey",
        "max_tokens",
        "sigma",
    ],
)
def test_ordinary_names(name: str) -> None:
    assert not is_secret_name(name)


def test_known_secrets_are_removed_from_any_text() -> None:
    assert (
        redact_text("login failed for hunter2!", known={"hunter2"})
        == f"login failed for {REDACTED}!"
    )
    assert secret_values(
        {
            "a": 1,
            "db": {"password": "pw-1", "port": 5432},
            "credentials": ["t-1", "t-2"],
            "max_tokens": "512",
        }
    ) == {"pw-1", "t-1", "t-2"}


# --------------------------------------------------------------------------- command lines


flag_forms = st.sampled_from(["sep", "eq", "short", "short-attached", "list"])


@SETTINGS
@given(secret=secrets_st, key=secret_keys, form=flag_forms, data=st.data())
def test_command_line_flags_never_keep_their_secret(secret: str, key: str, form: str, data) -> None:
    flag = "--" + key.replace("_", "-")
    if form == "sep":
        args = [flag, secret]
    elif form == "eq":
        args = [f"{flag}={secret}"]
    elif form == "short":
        args = ["-p", secret]
    elif form == "short-attached":
        args = [f"-p{secret}"]
    else:
        args = [f"{key}={secret}"]
    extra = data.draw(
        st.sampled_from(
            [
                [],
                ["--user", secret],
                [f"--note={secret}"],
                [f"postgresql://u:{secret}@h/db"],
                ["--verbose"],
            ]
        )
    )
    argv = (
        [sys.executable, "train.py", "--epochs", "3", *data.draw(st.permutations([*args, *extra]))]
        if form != "sep" and form != "short"
        else [sys.executable, "train.py", "--epochs", "3", *args, *extra]
    )
    out = redact_command_line(argv)
    assert not any(secret in arg for arg in out), out
    assert out[:4] == argv[:4]


def test_command_line_keeps_what_is_not_secret() -> None:
    argv = [
        "python",
        "x.py",
        "--db-password",
        "hunter2",
        "--user",
        "hunter2",
        "--token=abc",
        "-p",
        "pw12",
        "--dsn",
        "postgresql://u:pw@h/d",
        "--rows",
        "5",
        "--password",
        "--x",
    ]
    assert redact_command_line(argv) == [
        "python",
        "x.py",
        "--db-password",
        REDACTED,
        "--user",
        REDACTED,
        f"--token={REDACTED}",
        "-p",
        REDACTED,
        "--dsn",
        "postgresql://h/d",
        "--rows",
        "5",
        "--password",
        REDACTED,
    ]
    record = StepInfo(name="s", command_line=tuple(argv)).to_json()
    assert "hunter2" not in json.dumps(record) and "pw12" not in json.dumps(record)


# --------------------------------------------------------------------------- parameters, logs


def test_parameter_strings_are_redacted_like_any_text() -> None:
    clean_params = sanitize_parameters(
        {
            "dsn": "host=db user=bob password=hunter2",
            "url": "https://u:pw1234@h/x?sig=s1g5",
            "headers": {"X": "Bearer tok-123456"},
            "db_password": "hunter2",
        }
    )
    text = json.dumps(clean_params)
    for secret in ("hunter2", "pw1234", "s1g5", "tok-123456"):
        assert secret not in text
    assert clean_params["url"] == f"https://h/x?sig={REDACTED}"


def test_dws_dagster_log_records_are_redacted(caplog: pytest.LogCaptureFixture) -> None:
    logger = get_logger("dws_dagster.test_redaction")
    with caplog.at_level(logging.INFO):
        logger.warning("could not reach %s", "postgresql://bob:hunter2@db/x")
        try:
            raise RuntimeError("password=hunter2")
        except RuntimeError:
            logger.exception("step failed")
    text = "\n".join(r.getMessage() for r in caplog.records) + caplog.text
    assert "hunter2" not in text
    assert "postgresql://db/x" in text


# --------------------------------------------------------------------------- URIs (class 7)


def readme_uris() -> list[str]:
    import re

    root = Path(__file__).resolve().parents[2]
    readme = "\n".join(
        path.read_text() for path in [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    )
    found = re.findall(r"\b(?:s3a?|gs|hdfs|abfss|wasbs)://[^\s`)]+", readme)
    # `hdfs://host:port` (a placeholder in a naming example) is no URI to add
    return sorted(
        {
            uri.rstrip(".,")
            for uri in found
            if "..." not in uri and not re.search(r":[a-z]+(?:/|$)", uri)
        }
    )


def test_the_readme_and_docs_show_resource_uris() -> None:
    assert "abfss://container@account.dfs.core.windows.net/lake" in readme_uris()


@pytest.mark.parametrize("uri", readme_uris())
def test_every_uri_of_the_readme_can_be_added_and_named(uri: str, tmp_path: Path, cli) -> None:
    Workspace.init(tmp_path / "ws")
    code, out, err = cli(
        "add", "lake", "--role", "intermediate-data", "--uri", uri, cwd=tmp_path / "ws"
    )
    assert code == 0, err
    assert uri in out
    resource = Workspace.open(tmp_path / "ws").resource("lake")
    assert resource.uri == uri
    namespace, name = dataset_name(uri + "/part")
    assert name.endswith("part")
    if uri.startswith("abfss://"):
        assert namespace == "abfss://container@account.dfs.core.windows.net"


@pytest.mark.parametrize(
    ("uri", "secret", "said"),
    [
        ("s3a://AKIAIOSFODNN7EXAMPLE:wJalrXUtnFEMI@bucket/x", "wJalrXUtnFEMI", "password"),
        (
            "abfss://container:c2VjcmV0a2V5@account.dfs.core.windows.net/x",
            "c2VjcmV0a2V5",
            "password",
        ),
        ("postgresql://user:p@ss@host/db", "p@ss", "password"),
        ("https://acct.blob.core.windows.net/c?sv=2022&sig=SIGVALUE123", "SIGVALUE123", "'sig'"),
        ("s3a://bucket/x?X-Amz-Signature=SIGVALUE123", "SIGVALUE123", "X-Amz-Signature"),
        ("s3a://bucket/x?X-Amz-Credential=CREDVAL123", "CREDVAL123", "X-Amz-Credential"),
        ("gs://bucket/x?token=TOKENVAL123", "TOKENVAL123", "'token'"),
        ("https://h/x?access_token=TOKENVAL123", "TOKENVAL123", "access_token"),
    ],
)
def test_real_credentials_in_a_resource_uri_are_refused_without_echo(
    uri: str, secret: str, said: str, tmp_path: Path, cli
) -> None:
    ws = Workspace.init(tmp_path / "ws")
    before = (ws.meta_dir / "resources.json").read_bytes()
    code, out, err = cli("add", "lake", "--role", "intermediate-data", "--uri", uri, cwd=ws.root)
    assert code != 0
    assert "credentials" in err and said in err
    assert secret not in out + err
    assert "Traceback" not in err
    assert (ws.meta_dir / "resources.json").read_bytes() == before
    assert uri_credentials(uri) is not None


def test_a_malformed_uri_holding_a_credential_is_not_echoed(tmp_path: Path, cli) -> None:
    Workspace.init(tmp_path / "ws")
    code, out, err = cli(
        "add",
        "lake",
        "--role",
        "intermediate-data",
        "--uri",
        "etl:hunter2-pw@db/x",
        cwd=tmp_path / "ws",
    )
    assert code != 0 and "is not a URI" in err
    assert "hunter2-pw" not in out + err


@pytest.mark.parametrize(
    ("uri", "namespace"),
    [
        (
            "abfss://container@account.dfs.core.windows.net/lake/x",
            "abfss://container@account.dfs.core.windows.net",
        ),
        (
            "abfss://container:secretkey@account.dfs.core.windows.net/lake/x",
            "abfss://container@account.dfs.core.windows.net",
        ),
        ("wasbs://box:p@ss@acct.dfs.core.windows.net/x", "wasbs://box@acct.dfs.core.windows.net"),
        ("s3a://AKIA:pa/ss@bucket/x", "s3://bucket"),
        ("postgresql://user:pa/ss@host/db", "postgresql://host"),
    ],
)
def test_dataset_names_keep_the_container_and_drop_any_password(uri: str, namespace: str) -> None:
    assert dataset_name(uri)[0] == namespace


@SETTINGS
@given(
    scheme=st.sampled_from(["s3a", "s3", "gs", "abfss", "wasbs", "hdfs", "https", "file"]),
    user=users,
    secret=uri_secrets,
    path=st.sampled_from(["/lake", "/a/b/c", "/"]),
    container=st.booleans(),
)
def test_dataset_names_never_hold_a_password(
    scheme: str, user: str, secret: str, path: str, container: bool
) -> None:
    host = "account.dfs.core.windows.net" if scheme in ("abfss", "wasbs") else "bucket"
    assume(secret not in f"{scheme}://{user}@{host}{path}")
    namespace, name = dataset_name(f"{scheme}://{user}:{secret}@{host}{path}")
    assert secret not in namespace + name
    if scheme == "abfss":
        assert namespace == f"abfss://{user}@{host}"


# --------------------------------------------------------------------------- script API


SCRIPT = """
import sys
from dws_dagster.lineage import LineageBuilder
params = {"epochs": 3, "db_password": sys.argv[1], "dsn": sys.argv[2],
          "nested": {"apiKey": sys.argv[1], "note": "uses " + sys.argv[2]}}
with LineageBuilder().as_script_step().with_parameters(params).with_no_inputs() \\
        .with_output_path("data/inter/out").eval() as lineage:
    raise RuntimeError(sys.argv[3])
"""


def test_a_failed_script_step_records_no_secret_anywhere(
    ws: Workspace, tmp_path: Path, cli
) -> None:
    """A real script process: its command line carries secrets in every flag form, its
    parameters and its error message too; nothing under the workspace, in the OpenLineage
    file or in the CLI's output holds any of them afterwards."""
    secrets = [
        "hunter2-pw",
        "p@ss@word",
        "sig-value-9",
        "tok-4242-x",
        "short-p-pw",
        "eq-form-pw",
        "ghp_" + "Z9" * 18,
    ]
    script = write(ws.root / "code" / "train.py", SCRIPT)
    error = (
        f"could not connect to postgresql://bob:{secrets[1]}@db:5432/x "
        f"(password={secrets[0]}); GET https://h/x?sig={secrets[2]} with "
        f"Authorization: Bearer {secrets[3]}, key {secrets[6]}"
    )
    done = run_python(
        f"import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path({str(script)!r}, "
        "run_name='__main__')",
        ws.root,
        str(script),
        secrets[0],
        f"postgresql://bob:{secrets[1]}@db/x",
        error,
        "--db-password",
        secrets[0],
        f"--api-token={secrets[3]}",
        "-p",
        secrets[4],
        f"--secret={secrets[5]}",
        "--url",
        f"https://h/x?sig={secrets[2]}",
    )
    assert done.returncode != 0 and "RuntimeError" in done.stderr
    record = ws.store.get("inter/out").attempt
    assert record["status"] == "failed"
    assert record["step"]["command_line"][-8:] == [
        "--db-password",
        REDACTED,
        f"--api-token={REDACTED}",
        "-p",
        REDACTED,
        f"--secret={REDACTED}",
        "--url",
        f"https://h/x?sig={REDACTED}",
    ]
    assert "postgresql://db:5432/x" in record["error"]
    outputs = []
    for args in (
        ["lineage", "inter/out"],
        ["lineage", "inter/out", "--format", "json"],
        ["status"],
        ["status", "--format", "json"],
    ):
        code, out, err = cli(*args, cwd=ws.root)
        outputs.append(out + err)
    assert_nowhere(ws.root, secrets, extra={"CLI output": "\n".join(outputs)})


def assert_nowhere(root: Path, secrets: list[str], extra: dict[str, str] | None = None) -> None:
    """No secret in the bytes of any file under `root` (the store's SQLite files and its
    write-ahead log among them), nor in any row of an SQLite store there (a long value spans
    pages, so its bytes are not all in one place), nor in `extra`'s texts."""
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for secret in secrets:
                assert secret.encode() not in data, f"{secret!r} is in {path}"
    for path in root.rglob("store.db"):
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            rows = "\n".join(connection.iterdump())
        finally:
            connection.close()
        assert "dws_records" in rows
        for secret in secrets:
            assert secret not in rows, f"{secret!r} is in a row of {path}"
    for where, text in (extra or {}).items():
        for secret in secrets:
            assert secret not in text, f"{secret!r} is in the {where}"


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    secret=secrets_st.filter(lambda s: "@" not in s[:1]),
    key=secret_keys,
    form=flag_forms,
    position=st.sampled_from(["userinfo", "query", "kv", "flag", "bearer"]),
    repeat=st.booleans(),
)
def test_script_steps_never_store_a_secret(
    secret: str, key: str, form: str, position: str, repeat: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same in-process, across generated secrets: `as_script_step()` records sys.argv
    with the secret in every flag form, the step fails with the secret in every position of
    its error text, and the workspace holds it nowhere."""
    flag = "--" + key.replace("_", "-")

    def failing_step(root: Path, value: str) -> Workspace:
        args = {
            "sep": [flag, value],
            "eq": [f"{flag}={value}"],
            "short": ["-p", value],
            "short-attached": [f"-p{value}"],
            "list": [f"{key}={value}"],
        }[form]
        error = {
            "userinfo": f"postgresql://bob:{value}@db/x refused",
            "query": f"GET https://h/x?sig={value}&se=1 -> 403",
            "kv": f"bad login {key}={value}",
            "flag": f"'{flag}', '{value}' exited 1",
            "bearer": f"Authorization: Bearer {value}",
        }[position]
        if repeat:
            error += f" (value {value})"
        ws = Workspace.init(root / "ws")
        ws.add_resource("inter", "intermediate-data", path="data/inter")
        monkeypatch.setattr(sys, "argv", [str(ws.root / "train.py"), "--rows", "2", *args])
        monkeypatch.chdir(ws.root)
        with pytest.raises(RuntimeError):
            with (
                LineageBuilder()
                .as_script_step()
                .with_parameters({key: value, "n": 1})
                .with_no_inputs()
                .with_output_path("data/inter/out")
                .eval()
            ):
                (ws.root / "data/inter/out").mkdir(parents=True)
                (ws.root / "data/inter/out/part-0.csv").write_text("a\n1\n")
                raise RuntimeError(error)
        return ws

    with tempfile.TemporaryDirectory() as tmp:
        # What the workspace holds whatever the secret (field and table names, the paths, the
        # flag): a secret that is part of it would be found without having leaked.
        baseline = failing_step(Path(tmp), "NEUTRAL-VALUE")
        assume(secret.encode() not in files_bytes(baseline.root))
    with tempfile.TemporaryDirectory() as tmp:
        ws = failing_step(Path(tmp), secret)
        record = ws.store.get("inter/out").attempt
        assert record["status"] == "failed" and record["error"].startswith("RuntimeError")
        assert_nowhere(ws.root, [secret])


def files_bytes(root: Path) -> bytes:
    """Every file under `root`, concatenated."""
    return b"\n".join(path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file())


def test_parameters_from_cli_output_and_results_json_hold_no_secret(ws: Workspace, cli) -> None:
    builder = (
        LineageBuilder()
        .with_step_name("train")
        .with_parameters({"dsn": "postgresql://bob:hunter2-pw@db/x", "header": "Bearer tok-4242-x"})
        .with_workspace_directory(ws.root)
        .with_no_inputs()
        .as_results_step(ws.root / "results/exp", run_description="password=desc-pw-1")
    )
    with builder.eval() as lineage:
        lineage.write_results({"mae": 1.0, "note": "token: met-tok-77"})
    code, out, err = cli("lineage", "results/exp", cwd=ws.root)
    assert code == 0
    assert_nowhere(
        ws.root,
        ["hunter2-pw", "tok-4242-x", "desc-pw-1", "met-tok-77"],
        extra={"CLI output": out + err},
    )


def test_snapshot_messages_and_resource_descriptions_hold_no_secret(ws: Workspace, cli) -> None:
    """Free text a user types is stored (the snapshot index, resources.json) and printed
    (`history`, `status`): a credential pasted into it is redacted like any other."""
    code, _, err = cli(
        "add",
        "lake",
        "--role",
        "intermediate-data",
        "--uri",
        "s3a://bucket/lake",
        "--description",
        "mirror of postgresql://etl:lake-pw-31@db/warehouse",
        cwd=ws.root,
    )
    assert code == 0, err
    write(ws.local_path("src/trips") / "part-0.csv", "a\n1\n")
    run_step = (
        LineageBuilder()
        .with_step_name("prep")
        .with_parameters({})
        .with_workspace_directory(ws.root)
        .with_input_ref("src/trips")
    )
    with run_step.eval() as lineage:
        lineage.add_output_ref("inter/prep")
        write(ws.local_path("inter/prep") / "part-0.csv", "b\n2\n")
    code, _, err = cli("snapshot", "s1", "-m", "retrained with api_key=snap-key-42", cwd=ws.root)
    assert code == 0, err
    outputs = [
        cli(*command, cwd=ws.root)
        for command in (
            ["history"],
            ["history", "--format", "json"],
            ["status"],
            ["status", "--format", "json"],
        )
    ]
    assert all(code == 0 for code, _, _ in outputs)
    [(message,)] = sql(ws, "SELECT message FROM dws_snapshots")
    assert message == f"retrained with api_key={REDACTED}"
    assert_nowhere(
        ws.root,
        ["lake-pw-31", "snap-key-42"],
        extra={"CLI output": "".join(out + err for _, out, err in outputs)},
    )


def test_errors_stored_before_redaction_are_redacted_when_shown(ws: Workspace, cli) -> None:
    """A record written by an older dws_dagster may hold an error text with a secret in it:
    `lineage` redacts it when it shows the last run."""
    write(ws.local_path("src/trips") / "part-0.csv", "a\n1\n")
    with pytest.raises(RuntimeError):
        with (
            LineageBuilder()
            .with_step_name("prep")
            .with_parameters({})
            .with_workspace_directory(ws.root)
            .with_input_ref("src/trips")
            .eval() as lineage
        ):
            lineage.add_output_ref("inter/prep")
            raise RuntimeError("marker-7f3 failed")
    damage(
        ws,
        "UPDATE dws_records SET body = replace(body, 'marker-7f3', "
        "'postgresql://etl:old-pw-93@db/x') WHERE body LIKE '%marker-7f3%'",
    )
    for args in (["lineage", "inter/prep"], ["lineage", "inter/prep", "--format", "json"]):
        code, out, err = cli(*args, cwd=ws.root)
        assert code == 0, err
        assert "old-pw-93" not in out + err and "db/x" in out


# --------------------------------------------------------------------------- store URLs (issue 32)

#: A store password as a person or a generator makes it: any character an environment variable
#: can hold (no NUL, no lone surrogate), at least two of them.
store_passwords = st.lists(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    min_size=2,
    max_size=20,
).map("".join)
#: Every way libpq and SQLAlchemy take a store password in a URL, percent-encoded (`{pw}` is the
#: encoded password; `passfile`, a path, is no secret and stays).
STORE_URL_FORMS = [
    "postgresql://etl:{pw}@127.0.0.1:1/lineage",
    "postgresql+psycopg2://etl:{pw}@127.0.0.1:1/lineage?sslmode=disable",
    "postgresql://etl@127.0.0.1:1/lineage?password={pw}",
    "postgresql://etl@127.0.0.1:1/lineage?sslmode=disable&password={pw}&application_name=x",
    "postgresql://etl@127.0.0.1:1/lineage?sslpassword={pw}&passfile=%2Fhome%2Fetl%2F.pgpass",
    "postgresql://etl:{pw}@127.0.0.1:1/lineage?PASSWORD={pw}&sslpassword={pw}",
]


def _encoded(password: str, plus: bool) -> str:
    from urllib.parse import quote, quote_plus

    return quote_plus(password, safe="") if plus else quote(password, safe="")


@SETTINGS
@given(password=store_passwords, form=st.sampled_from(STORE_URL_FORMS), plus=st.booleans())
def test_a_store_url_is_shown_without_any_password_it_holds(
    password: str, form: str, plus: bool
) -> None:
    """`shown` (in every store error and in `status`) says the same whatever the password: the
    user-info's, `password=` or `sslpassword=` in the query, percent-encoded either way."""
    from dws_dagster.store.settings import resolve

    def shown(pw: str) -> str:
        url = form.format(pw=_encoded(pw, plus))
        return resolve(Path("/nowhere"), None, environ={"DWS_STORE_URL": url}).shown

    text = shown(password)
    assert text == shown("other-pw"), text
    assert "etl@127.0.0.1:1/lineage" in text
    if "passfile" in form:
        assert "passfile=%2Fhome%2Fetl%2F.pgpass" in text  # a path: not a secret


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(password=store_passwords, form=st.sampled_from(STORE_URL_FORMS), plus=st.booleans())
def test_an_unreachable_store_is_named_without_its_password(
    password: str, form: str, plus: bool, tmp_path_factory, cli, monkeypatch
) -> None:
    """The real CLI against a store that refuses the connection: its one-line error is the
    same whatever the password and wherever the URL holds it."""
    root = tmp_path_factory.getbasetemp() / "unreachable-store"
    if not root.exists():
        Workspace.init(root)

    def error(pw: str) -> str:
        monkeypatch.setenv("DWS_STORE_URL", form.format(pw=_encoded(pw, plus)))
        code, out, err = cli("status", cwd=root)
        assert code == 1 and out == "", err
        return err

    err = error(password)
    assert err == error("other-pw") and "could not" in err
    assert err.startswith("error: workspace store postgresql") and len(err.splitlines()) == 1


@SETTINGS
@given(password=store_passwords, unquoted=st.booleans())
def test_a_libpq_connection_string_in_the_store_variable_is_refused_without_its_password(
    password: str, unquoted: bool, cli, tmp_path_factory, monkeypatch
) -> None:
    """`host=… password=…` (libpq's key=value form) is no SQLAlchemy URL: refused, and the
    refusal quotes it without the password, quoted (any character) or bare."""
    if unquoted:
        assume(not any(c.isspace() or c in "'\"\\`" for c in password))

    def value(pw: str) -> str:
        return pw if unquoted else "'" + pw.replace("\\", "\\\\").replace("'", "\\'") + "'"

    root = tmp_path_factory.getbasetemp() / "libpq-store"
    if not root.exists():
        Workspace.init(root)

    def error(pw_value: str) -> str:
        monkeypatch.setenv("DWS_STORE_URL", f"host=db.internal port=5432 password={pw_value}")
        code, out, err = cli("status", cwd=root)
        assert code == 1 and out == "", err
        return err

    err = error(value(password))
    assert err == error(value("other-pw")), err
    assert "is not a database URL" in err


@SETTINGS
@given(password=store_passwords, plus=st.booleans(), lead=prose)
def test_credential_query_values_of_any_characters_are_removed_from_text(
    password: str, plus: bool, lead: str
) -> None:
    """redact_text (errors, logs): each libpq and SQLAlchemy credential parameter of a URL's
    query loses its whole percent-encoded value, and the text around it is kept as it was."""
    for name in ("password", "sslpassword", "PASSWORD"):
        url = "postgresql://db/x?sslmode=require&" + name + "={pw}&passfile=p - down"
        out = redact_text(lead + url.format(pw=_encoded(password, plus)))
        assert out == lead + url.format(pw=REDACTED), out


@SETTINGS
@given(
    password=store_passwords.filter(lambda s: "'" not in s and "\\" not in s),
    name=st.sampled_from(["password", "sslpassword"]),
)
def test_libpq_key_value_passwords_are_removed_from_text(password: str, name: str) -> None:
    template = "connect(host=db port=5432 {name}='{pw}' dbname=x) failed"
    out = redact_text(template.format(name=name, pw=password))
    assert out == template.format(name=name, pw=REDACTED)
    assert redact_text("passfile=/home/etl/.pgpass sslkey=/k.pem") == (
        "passfile=/home/etl/.pgpass sslkey=/k.pem"
    )


def test_a_query_password_cannot_be_written_to_config_json() -> None:
    from dws_dagster.errors import WorkspaceConfigError
    from dws_dagster.store.settings import resolve, store_entry

    for url in ("postgresql://u@h/d?password=pw1", "postgresql://u@h/d?sslpassword=pw1"):
        with pytest.raises(WorkspaceConfigError, match="holds a password") as caught:
            store_entry(url)
        assert "pw1" not in str(caught.value)
        with pytest.raises(WorkspaceConfigError, match="holds a password") as caught:
            resolve(Path("/nowhere"), {"url": url}, environ={})
        assert "pw1" not in str(caught.value)


def test_status_names_a_reachable_store_without_the_password_of_its_query(
    postgres_server, tmp_path: Path, monkeypatch
) -> None:
    """A real PostgreSQL store whose password is in the URL's query (as libpq accepts it):
    `status`, text and JSON, names the store without it."""
    from urllib.parse import quote

    server = postgres_server
    url = (
        f"postgresql://{server.user}@{server.host}:{server.port}/{STORE_DATABASE}"
        f"?password={quote(server.password, safe='')}"
    )
    env = {"DWS_STORE_URL": url, "DWS_STORE_SCHEMA": "t_query_password"}
    Workspace.init(tmp_path / "w")
    for fmt in ("text", "json"):
        done = subprocess.run(
            [sys.executable, "-m", "dws_dagster.cli", "status", "--format", fmt],
            cwd=tmp_path / "w",
            env={**os.environ, "PYTHONPATH": str(ROOT), **env},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert server.password not in done.stdout + done.stderr
        assert f"password={REDACTED}" in done.stdout


# --------------------------------------------------------------------------- prose around values


@SETTINGS
@given(
    secret=secrets_st.filter(lambda s: s[-1] not in ",.;:!?)]}" and "(" not in s),
    punct=st.sampled_from([",", ".", ";", ":", "!", "?", ")"]),
    form=st.sampled_from(
        [
            "see https://acct.blob.core.windows.net/c/x?sv=1&sig={v}{p} next",
            "failed with token={v}{p} retrying",
            "(password: {v}{p} then",
            "GET https://h/x?X-Amz-Signature={v}{p}\nnext line",
        ]
    ),
)
def test_punctuation_after_a_redacted_value_is_kept(secret: str, punct: str, form: str) -> None:
    """A comma (or full stop, bracket) that ends a sentence after a secret is prose: the value is
    removed, the punctuation stays."""
    if form.startswith("(") and punct == ")":
        form = form.replace("(", "")  # a lone ")" after an unbracketed value is prose too
    out = redact_text(form.format(v=secret, p=punct))
    assert out == form.format(v=REDACTED, p=punct), out


@SETTINGS
@given(
    secret=secrets_st.filter(lambda s: "(" not in s),
    punct=st.sampled_from([",", ".", ";", ":", "!", "?", ")"]),
    form=st.sampled_from(
        [
            "host=db port=5432 password={v}{p} dbname=x",
            "failed with token={v}{p}",
            "token={v}{p}y in a sentence",
            "GET https://h/x?sig={v}{p}",
            "'https://h/x?sig={v}{p}' failed",
        ]
    ),
)
def test_punctuation_that_may_be_the_secrets_own_is_redacted_with_it(
    secret: str, punct: str, form: str
) -> None:
    """Where a comma (or full stop, bracket...) cannot be told from the secret's last character
    (before another setting, at the end of the text or a quote, inside the value), it goes
    with the secret."""
    out = redact_text(form.format(v=secret, p=punct))
    assert out == form.replace("{p}y", "{p}").format(v=REDACTED, p=""), out
    assert secret + punct not in out
