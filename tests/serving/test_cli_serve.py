"""`plait serve` as users start it: refusals before it listens, and a drain on SIGTERM."""

from __future__ import annotations

import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
import requests

from tests.serving.conftest import row_request


def test_a_model_folder_that_is_missing_or_incomplete_is_refused_before_listening(trained, tmp_path, cli_error):
    assert "does not exist" in cli_error("serve", "--model-path", tmp_path / "nowhere")
    damaged = shutil.copytree(trained[0], tmp_path / "model")
    (damaged / "model_weights.safetensors").unlink()
    assert "model_weights.safetensors is missing" in cli_error("serve", "--model-path", damaged)


def test_a_port_in_use_and_a_bad_setting_are_refused_with_what_to_do(trained, cli_error, cli):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        message = cli_error("serve", "--model-path", trained[0], "--port", port, "--backend", "local")
    assert f"cannot listen on 127.0.0.1:{port}" in message and "pick another --port" in message
    code, _, err = cli("serve", "--model-path", trained[0], "--num-replicas", 0)
    assert code == 2 and "serve.num_replicas" in err and "Traceback" not in err


@pytest.mark.parametrize("flags, expected", [
    (["--port", 70000], "--port 70000: a port is a number from 0 to 65535 (0: any free one)"),  # was an OverflowError
    (["--port", -1], "--port -1: a port is a number from 0 to 65535"),
    (["--host", "bad host"], "--host 'bad host': "),
    (["--host", ".."], "--host '..': not a host name; give an address of this machine"),
    (["--host", "192.0.2.1"], "--host '192.0.2.1': "),  # not this machine's (TEST-NET-1)
    (["--num-replicas", -1], "serve.num_replicas"),
])
def test_a_bad_flag_is_one_error_line_before_listening(trained, cli, flags, expected):
    code, out, err = cli("serve", "--model-path", trained[0], "--backend", "local", *flags)
    assert code == 2 and out == "" and "Traceback" not in err and err.count("plait: error:") == 1, err
    assert err.startswith("plait: error: ") and expected in err, err
    assert "--host" not in expected or "give an address of this machine: 127.0.0.1" in err


def test_sigterm_under_load_answers_every_request_it_accepted(trained):
    """Eight clients keep the server busy; SIGTERM comes. Every request the server read whole is
    answered 200, the clients got exactly those answers, and the process exits cleanly."""
    model_path, rows, _ = trained
    server = subprocess.Popen([sys.executable, "-m", "plait", "serve", "--model-path", model_path, "--port", "0",
                               "--backend", "local"], stderr=subprocess.PIPE, text=True)
    try:
        url = _served_url(server)
        answered, failures, stop = [0] * 8, [], threading.Event()

        def client(k: int) -> None:
            with requests.Session() as http:
                while not stop.is_set():
                    try:
                        response = http.post(f"{url}/predict", json=row_request(rows.iloc[k]), timeout=30)
                    except requests.ConnectionError:
                        return  # the server closed: the request was not accepted
                    if response.status_code != 200:
                        failures.append(response.status_code)
                    answered[k] += 1

        clients = [threading.Thread(target=client, args=(k,)) for k in range(8)]
        for c in clients:
            c.start()
        # Under load: SIGTERM comes once a hundred requests are answered (a count, not a time: the
        # suite's other work slows the server down).
        deadline = time.monotonic() + 120
        while sum(answered) < 100 and time.monotonic() < deadline:
            time.sleep(0.05)
        server.send_signal(signal.SIGTERM)
        assert server.wait(30) == 0
        stop.set()
        for c in clients:
            c.join(30)
        log = server.stderr.read()
    finally:
        server.kill()
    accepted, served = map(int, re.search(r"Stopped: (\d+) prediction requests accepted, (\d+) answered", log).groups())
    assert not failures
    assert accepted == served == sum(answered) >= 100


def _served_url(server: subprocess.Popen) -> str:
    for line in server.stderr:
        found = re.search(r"on (http://[\d.]+:\d+) ", line)
        if found:
            return found.group(1)
    raise AssertionError(f"the server did not start (exit {server.wait()})")
