"""What a client gets wrong gets a 4xx with a message it can act on, never a 500 or a dead server."""

from __future__ import annotations

import select
import socket
import time

import orjson
import pytest

from tests.serving.conftest import RunningServer, assert_same_predictions, row_request, split_request


@pytest.fixture(scope="module")
def good(trained):
    _, rows, expected = trained
    return row_request(rows.iloc[0]), expected.head(1)


def error_of(response, status: int) -> str:
    assert response.status_code == status, response.text
    return response.json()["error"]


def test_a_missing_and_an_unknown_feature_are_named(server, http, good):
    row = {k: v for k, v in good[0].items() if k != "cat"} | {"nmu": 3}
    message = error_of(http.post(f"{server.url}/predict", json=row), 400)
    assert "missing input feature(s) 'cat'" in message
    assert "unknown feature(s) 'nmu' (did you mean 'num'?)" in message


@pytest.mark.parametrize("column, value, expected", [
    ("num", "ten", "input feature 'num' (number) expects a number, got 'ten'"),
    ("num", True, "expects a number, not true or false"),
    ("flag", "maybe", "input feature 'flag' (binary) expects true or false (or one of the labels it was trained on"),
    ("vec", [1, 2], "input feature 'vec' (vector) expects 3 numbers, got 2"),
    ("vec", "1 x 3", "expects 3 numbers, got '1 x 3'"),
    ("cat", {"a": 1}, "input feature 'cat' (category) expects a string, got a JSON object"),
])
def test_a_value_of_the_wrong_type_names_the_feature_and_what_it_expects(server, http, good, column, value, expected):
    assert expected in error_of(http.post(f"{server.url}/predict", json=good[0] | {column: value}), 400)
    # A batch takes and refuses the same values, naming the row (a column of JSON true for a
    # number feature was read as 1.0).
    message = error_of(http.post(f"{server.url}/batch_predict", json=[good[0] | {column: value}] * 2), 400)
    assert message.startswith("row 0 of the batch: input feature ") and expected in message


@pytest.mark.parametrize("body, content_type, expected", [
    (b'{"num": 1,', "application/json", "the body is not valid JSON"),
    (b"[1, 2]", "application/json", "/predict takes one row: a JSON object"),
    (b"", "application/json", "the body is not valid JSON"),
    (b"--x\r\nbroken", "multipart/form-data; boundary=x", ""),
    (b'{"num": NaN}', "application/json", "the body is not valid JSON: unexpected character"),
    (b'{"num": Infinity}', "application/json", "the body is not valid JSON: unexpected character"),
    (b"[" * 100_000 + b"]" * 100_000, "application/json", "the body is not valid JSON: depth limit exceeded"),
    (b'{"cat": "\\ud800"}', "application/json", "the body is not valid JSON: no low surrogate"),
    (b'{"cat": "\xff"}', "application/json", "the body is not valid JSON: str is not valid UTF-8"),
    (b"<row><num>1</num></row>", "application/xml", "not valid JSON (and its content-type is application/xml; "
                                                    "this server reads application/json, or a form)"),
    (b'{"num": 1}', "application/x-www-form-urlencoded", "the body is JSON, but its content-type says a form"),
])
def test_a_body_that_does_not_parse_is_a_400(server, http, body, content_type, expected):
    assert expected in error_of(http.post(f"{server.url}/predict", data=body, headers={"content-type": content_type}), 400)


@pytest.mark.parametrize("payload, expected", [
    ({"columns": ["num"], "data": []}, "the batch has no rows"),
    ([], "the batch has no rows"),
    ({"rows": []}, "a batch is pandas \"split\" JSON"),
    ({"columns": ["num", "cat"], "data": [[1]]}, "row 0 of the batch has 1 values for 2 columns"),
    ([{"num": 1}, {"cat": "a"}], "record 1 of the batch has other keys than record 0"),
    ({"columns": ["num"], "data": [[1]]}, "the batch: missing input feature(s) 'cat'"),
])
def test_a_malformed_or_empty_batch_is_a_400(server, http, payload, expected):
    assert expected in error_of(http.post(f"{server.url}/batch_predict", json=payload), 400)


def test_sixty_thousand_column_names_are_refused_at_once_and_named_in_a_few_words(server, http, good):
    names = [f"c{i}" for i in range(60_000)]
    started = time.monotonic()
    twice = error_of(http.post(f"{server.url}/batch_predict", json={"columns": names + ["c7"], "data": [[1] * 60_001]}),
                     400)
    unknown = error_of(http.post(f"{server.url}/batch_predict", json={"columns": names, "data": [[1] * 60_000]}), 400)
    in_a_row = error_of(http.post(f"{server.url}/predict", json=good[0] | dict.fromkeys(names, 1)), 400)
    assert time.monotonic() - started < 10  # each name counted with list.count took 110 s, on the event loop
    assert twice == "the batch names column(s) 'c7' more than once"
    assert "unknown feature(s) 'c0', 'c1', 'c2', 'c3', 'c4', 'c5', 'c6', 'c7', 'c8', 'c9' and 59990 more." in unknown
    assert len(unknown) < 400 and len(in_a_row) < 400


def test_a_batch_value_the_features_refuse_is_a_400(server, http, trained):
    _, rows, _ = trained
    batch = split_request(rows.head(3))
    batch["data"][1][0] = "ten"
    message = error_of(http.post(f"{server.url}/batch_predict", json=batch), 400)
    assert "'num'" in message and "'ten'" in message


def test_a_form_without_the_dataset_field_says_where_the_rows_go(server, http):
    assert "no 'dataset' field" in error_of(http.post(f"{server.url}/batch_predict", files={"data": (None, "x")}), 400)
    assert "not valid JSON" in error_of(http.post(f"{server.url}/batch_predict", files={"dataset": (None, "")}), 400)


def test_a_thousand_bad_requests_leave_the_server_answering_good_ones_correctly(server, http, good):
    row, expected = good
    bad = [({"json": row | {"num": "ten"}}, 400), ({"data": b"{", "headers": {"content-type": "application/json"}}, 400),
           ({"json": {}}, 400), ({"json": [row]}, 400)]
    for i in range(1000):
        kwargs, status = bad[i % len(bad)]
        assert http.post(f"{server.url}/predict", **kwargs).status_code == status
    assert_same_predictions([http.post(f"{server.url}/predict", json=row).json()], expected, exact=False)
    assert http.get(f"{server.url}/").status_code == 200


@pytest.fixture(scope="module")
def strict_server(trained):
    """A server with small limits, to reach each one."""
    settings = {"max_request_bytes": 4096, "max_batch_rows": 5, "body_timeout_s": 0.5, "max_header_bytes": 2048}
    with RunningServer(trained[0], settings) as running:
        yield running


def test_a_body_over_the_size_limit_is_a_413(strict_server, http, good):
    message = error_of(http.post(f"{strict_server.url}/predict", json=good[0] | {"txt": "word " * 2000}), 413)
    assert "at most 4096 (serve.max_request_bytes)" in message


def test_too_many_rows_in_one_batch_is_a_413(strict_server, http, good):
    message = error_of(http.post(f"{strict_server.url}/batch_predict", json=[good[0]] * 6), 413)
    assert "the batch has 6 rows; this server takes at most 5 per request (serve.max_batch_rows)" in message


def test_a_client_too_slow_to_send_its_body_gets_a_408_and_the_server_goes_on(strict_server, http, good):
    host, port = strict_server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as slow:
        slow.sendall(b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
        slow.settimeout(10)
        started = time.monotonic()
        answer = slow.recv(4096).decode()
    assert answer.startswith("HTTP/1.1 408") and "did not arrive within 0.5 s" in answer
    assert time.monotonic() - started < 5
    assert http.post(f"{strict_server.url}/predict", json=good[0]).status_code == 200


def test_clients_that_hang_up_mid_body_or_before_the_answer_leave_the_server_answering(server, http, good):
    host, port = server.url.removeprefix("http://").split(":")
    body = orjson.dumps(good[0])
    for sent in (body[:5], body):
        with socket.create_connection((host, int(port))) as gone:
            gone.sendall(b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n" % len(body) + sent)
    assert http.post(f"{server.url}/predict", json=good[0]).status_code == 200


def test_a_prediction_over_the_time_limit_is_a_504_naming_the_limit(trained, http, good):
    with RunningServer(trained[0], {"request_timeout_s": 1e-6}) as hurried:
        message = error_of(http.post(f"{hurried.url}/predict", json=good[0]), 504)
        assert "longer than this server's limit of 1e-06 s (serve.request_timeout_s)" in message
        assert http.get(f"{hurried.url}/").status_code == 200


def test_after_a_504_the_abandoned_batch_stops_and_the_next_request_is_answered_at_once(trained, http, good):
    """A batch past the time limit stops after the piece it is in; it used to go on predicting
    every row on the one model thread, and the requests after it got 504s too."""
    many = split_request(trained[1].sample(100_000, replace=True, random_state=0))
    with RunningServer(trained[0], {"request_timeout_s": 2, "batch_piece_rows": 100}) as hurried:
        assert "longer than this server's limit of 2 s" in error_of(http.post(f"{hurried.url}/batch_predict", json=many),
                                                                    504)
        started = time.monotonic()
        assert http.post(f"{hurried.url}/predict", json=good[0]).status_code == 200
        assert time.monotonic() - started < 1.5


@pytest.mark.parametrize("method, path, status, expected", [
    ("GET", "/nope", 404, "there is no endpoint '/nope'; this server answers GET /, /info, /metrics; POST /predict"),
    ("GET", "/..%2f..%2fetc/passwd", 404, "there is no endpoint '/../../etc/passwd'"),
    ("GET", "/predict", 405, "'/predict' does not take GET; this server answers"),
    ("PUT", "/batch_predict", 405, "'/batch_predict' does not take PUT"),
    ("POST", "/", 405, "'/' does not take POST"),
])
def test_an_unknown_path_or_method_is_a_json_error(server, http, method, path, status, expected):
    assert expected in error_of(http.request(method, f"{server.url}{path}"), status)


def exchange(server, *pieces: bytes, pause_s: float = 0.0) -> bytes:
    """What the server answers on a raw connection to ``pieces`` of bytes sent one by one, until
    it answers and closes (or 10 s pass)."""
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as raw:
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for piece in pieces:
            raw.sendall(piece)
            if select.select([raw], [], [], pause_s)[0]:
                break
        raw.settimeout(10)
        answer = b""
        while chunk := raw.recv(65536):
            answer += chunk
    return answer


def test_a_request_that_is_not_http_is_a_json_400(server, http):
    answer = exchange(server, b"GARBAGE\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400 ") and b'{"error":"the request is not valid HTTP/1.1' in answer
    assert http.get(f"{server.url}/").status_code == 200


def test_headers_over_the_limit_are_a_431_and_the_server_goes_on(strict_server, http):
    head = [b"GET / HTTP/1.1\r\nHost: x\r\n"] + [b"X-Filler: " + b"a" * 500 + b"\r\n"] * 20
    answer = exchange(strict_server, *head, pause_s=0.01)
    assert answer.startswith(b"HTTP/1.1 431 ") and b"more than 2048 bytes" in answer and b"serve.max_header_bytes" in answer
    assert http.get(f"{strict_server.url}/").status_code == 200


def test_200_mb_of_headers_are_not_read(server, http):
    """httptools reads a head of any size: 200 MB were read whole. The server stops reading
    past its limit (64 KiB) and closes, and other clients are served meanwhile."""
    host, port = server.url.removeprefix("http://").split(":")
    sent, line = 0, b"X-Filler: " + b"a" * 65_000 + b"\r\n"
    with socket.create_connection((host, int(port))) as raw:
        raw.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
        with pytest.raises(OSError):  # the server closed the connection
            while sent < 200 << 20:
                raw.sendall(line)
                sent += len(line)
    assert sent < 32 << 20  # what the two sockets' buffers held before the server closed
    assert http.get(f"{server.url}/").status_code == 200


def test_a_client_too_slow_to_send_its_headers_gets_a_408_and_others_are_served(strict_server, http, good):
    host, port = strict_server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as slow:
        slow.sendall(b"POST /predict HTTP/1.1\r\nHost: x\r\n")
        assert http.post(f"{strict_server.url}/predict", json=good[0]).status_code == 200
        slow.settimeout(10)
        started = time.monotonic()
        answer = slow.recv(4096)
    assert answer.startswith(b"HTTP/1.1 408 ") and b"headers did not arrive within 0.5 s" in answer
    assert time.monotonic() - started < 5
