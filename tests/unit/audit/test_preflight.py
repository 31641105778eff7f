"""Preflight's parts: the options each backend declares match what its module reads, and the
server probe tells an unreachable server, a rejected key and a server without /models apart."""

from __future__ import annotations

import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ableaudit.audit.preflight import Probe, check_servers, probe_server
from ableaudit.backends.registry import backend_entry
from tests.fixtures.openai_server import closed_port_url

BACKENDS = Path(__file__).resolve().parents[3] / "ableaudit" / "backends"

# backend (name, task) -> the modules whose code reads its options
READERS = {
    ("llamacpp", "text"): ["llamacpp.py"],
    ("openai", "text"): ["openai_compat.py"],
    ("openai", "vision"): ["openai_compat.py"],
    ("vllm", "text"): ["vllm_backend.py"],
    ("transformers", "text"): ["transformers_backend.py"],
    ("transformers", "vision"): ["transformers_backend.py", "transformers_vlm.py"],
}


@pytest.mark.parametrize("name, task", list(READERS))
def test_declared_options_are_the_keys_the_backend_reads(name, task):
    read = set()
    for module in READERS[(name, task)]:
        text = (BACKENDS / module).read_text()
        read |= set(re.findall(r"""opts(?:\.get\(|\[)["']([a-z_]+)["']""", text))
    assert read, "the pattern found no option read: the test would prove nothing"
    assert set(backend_entry(name, task).options) == read


class _Status(BaseHTTPRequestHandler):
    """Answers every GET with the status and body the server was made with."""

    def log_message(self, *a):
        pass

    def do_GET(self):
        code, body = self.server.reply
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def answering():
    servers = []

    def start(code: int, body: bytes = b"") -> str:
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Status)
        httpd.reply = (code, body)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        servers.append(httpd)
        return f"http://127.0.0.1:{httpd.server_address[1]}/v1"

    yield start
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()


def test_a_rejected_key_is_named(answering):
    url = answering(401, b'{"error": "bad key"}')
    said = probe_server(Probe("target 'm'", url, "m", "k"))
    assert said == (
        f"target 'm': {url} rejected the API key (HTTP 401); check the env var the target's "
        "`api_key_env:` names"
    )


@pytest.mark.parametrize("code, body", [(404, b"no such route"), (200, b"<html>not json</html>")])
def test_a_server_without_a_model_listing_passes(answering, code, body):
    assert probe_server(Probe("target 'm'", answering(code, body), "m", None)) is None


def test_a_base_url_without_v1_gets_a_suggestion(answering):
    url = answering(404, b"not found").removesuffix("/v1")
    said = probe_server(Probe("target 'm'", url, "m", None))
    assert f"{url} has no /models (HTTP 404)" in said and f"did you mean base_url {url}/v1?" in said


def test_a_listing_that_serves_the_model_passes(answering):
    url = answering(200, b'{"data": [{"id": "other"}, {"id": "m"}]}')
    assert probe_server(Probe("target 'm'", url, "m", None)) is None


def test_credentials_in_a_url_are_never_shown(answering):
    url = closed_port_url().replace("http://", "http://user:s3cret-canary@")
    (said,) = check_servers([Probe("target 'm'", url, "m", None)])
    assert "s3cret-canary" not in said and "cannot reach http://127.0.0.1:" in said


def test_each_server_is_asked_once(answering):
    url = closed_port_url()
    probes = [Probe("target 'm'", url, "m", None)] * 3
    assert len(check_servers(probes)) == 1


def test_a_server_that_never_answers_is_unreachable_after_the_timeout():
    with socket.socket() as silent:  # listens, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/v1"
        said = probe_server(Probe("judge 'j'", url, "m", None), timeout_s=0.5)
    assert said.startswith(f"judge 'j': cannot reach {url} (GET /models: ")
    assert "timed out" in said and "Start the server (e.g. `vllm serve m --port" in said
