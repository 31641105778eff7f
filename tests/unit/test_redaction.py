"""Every key the process can see, in each form it travels, and key-shaped tokens are replaced
by the marker; ordinary text is left alone."""

from __future__ import annotations

import base64
import logging
from urllib.parse import quote

import pytest

from ableaudit import redaction
from ableaudit.redaction import MARKER, redact

KEY = "canary-Zq7xK2pW9vR4"


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setattr(redaction, "_env_names", set())
    monkeypatch.setattr(redaction, "_values", set())
    monkeypatch.setattr(redaction, "_pairs", set())


def test_the_value_of_a_named_env_var_is_redacted_in_plain_url_encoded_and_base64(monkeypatch):
    monkeypatch.setenv("MY_SERVER_CRED", KEY + "/+=")
    assert KEY in redact(f"bad key {KEY}/+=")  # a variable of no key-like name, not named yet
    redaction.remember_env("MY_SERVER_CRED")
    value = KEY + "/+="
    for form in (value, quote(value, safe=""), base64.b64encode(value.encode()).decode()):
        out = redact(f"401 Incorrect API key provided: {form}.")
        assert out == f"401 Incorrect API key provided: {MARKER}.", (form, out)


def test_openai_api_key_and_key_named_variables_need_no_registration(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("HF_TOKEN", "hf" + KEY)
    assert redact(f"echo {KEY} and hf{KEY}") == f"echo {MARKER} and {MARKER}"


def test_url_credentials_are_redacted_as_basic_auth_sends_them():
    redaction.remember_url(f"--base-url=http://alice:{quote(KEY + '@x')}@127.0.0.1:8/v1")
    basic = base64.b64encode(f"alice:{KEY}@x".encode()).decode()
    assert redact(f"got Authorization {basic}") == f"got Authorization {MARKER}"
    assert redact(f"key {KEY}@x") == f"key {MARKER}"
    assert redact("user alice") == "user alice"  # a user name is no secret


def test_key_shaped_tokens_are_redacted_whatever_their_value():
    text = (
        "Incorrect API key provided: sk-proj-abc123DEF456. Authorization: Bearer abc.def123; "
        "header Basic dXNlcjpzay1jYW5hcnk= from http://u:p4ss@host/v1"
    )
    out = redact(text)
    assert "sk-proj" not in out and "abc.def123" not in out and "dXNlcjpz" not in out
    assert "p4ss" not in out and "http://host/v1" in out
    assert out.count(MARKER) == 3


def test_ordinary_text_is_left_alone():
    text = "Basic information about screen readers; a task-based plan (see sk-learn docs)."
    assert redact(text) == text
    assert redact(None) is None


def test_a_short_value_is_not_searched_for_as_it_is(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "EMPTY")
    assert redact("EMPTY answer") == "EMPTY answer"


def test_log_records_are_redacted_before_any_handler_sees_them(monkeypatch, caplog):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    redaction.install_log_redaction()
    logger = logging.getLogger("ableaudit.test_redaction")
    with caplog.at_level(logging.INFO, logger=logger.name):
        try:
            raise RuntimeError(f"server said {KEY}")
        except RuntimeError:
            logger.exception("call failed with %s", KEY)
    record = caplog.records[-1]
    assert KEY not in record.getMessage() and KEY not in (record.exc_text or "")
    assert KEY not in caplog.text and MARKER in caplog.text
