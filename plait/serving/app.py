"""The HTTP app: Ludwig's endpoints over a :class:`ServedModel`, as one ASGI (FastAPI) app.

The same app runs under uvicorn here and inside each Ray Serve replica; what differs is the
runner it is given, which decides where predictions are computed. Every endpoint answers JSON;
a request the client can fix gets a 4xx with ``{"error": message}``, and nothing a client sends
stops the server.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Awaitable, Callable

import orjson
from fastapi import FastAPI, Request, Response
from fastapi.responses import StreamingResponse
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from plait.errors import PlaitError
from plait.serving import explanations
from plait.serving import openai_api
from plait.serving import inference_protocol as oip
from plait.serving.metrics import ServerMetrics
from plait.serving.model import ServedModel
from plait.serving.payloads import Batch, ClientError, off_loop, parse_batch, parse_json, parse_row, read_body
from plait.serving.runners import Runner
from plait.serving.values import listed

log = logging.getLogger("plait")

ALIVE = {"message": "plait model server is alive"}
ENDPOINTS = ("GET /, /info, /metrics; POST /predict, /batch_predict, /explain; and the Open Inference Protocol's "
             "GET /v2, /v2/health/live, /v2/health/ready, /v2/models/{name}, /v2/models/{name}/ready, POST "
             "/v2/models/{name}/infer")


def json_response(value: Any, status: int = 200) -> Response:
    # OPT_SERIALIZE_NUMPY: float32 predictions are written with their shortest digits, as in a CSV.
    return Response(orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY), status_code=status,
                    media_type="application/json")


def error_response(status: int, message: str) -> Response:
    return json_response({"error": message}, status)


async def http_error(request: Request, exc: HTTPException) -> Response:
    """An unknown path (404) or a method an endpoint does not take (405), in plait's shape."""
    path = listed([request.url.path])
    if exc.status_code == 404:
        message = f"there is no endpoint {path}; this server answers {ENDPOINTS}"
    elif exc.status_code == 405:
        message = f"{path} does not take {request.method}; this server answers {ENDPOINTS}"
    else:
        message = str(exc.detail)
    response = error_response(exc.status_code, message)
    response.headers.update(exc.headers or {})
    return response


def build_app(model: ServedModel, runner: Runner, metrics: ServerMetrics | None = None) -> FastAPI:
    settings = model.settings
    metrics = metrics or ServerMetrics()
    info = model.info()

    @asynccontextmanager
    async def lifespan(_app):
        yield
        await runner.stop()

    app = FastAPI(title="plait model server", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.metrics = metrics
    app.add_exception_handler(HTTPException, http_error)
    if settings.allowed_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=settings.allowed_origins, allow_methods=["GET", "POST"],
                           allow_headers=["*"])

    async def answer(endpoint: str, request: Request, work: Callable[[Request, bytes], Awaitable[Response]],
                     error_response: Callable[[int, str], Response] = error_response) -> Response:
        """Read the body within its limits, do the work within the time limit, count it;
        ``error_response``: how a refusal is written (the OpenAI endpoints write OpenAI's shape)."""
        started, accepted = time.perf_counter(), False
        metrics.in_flight.inc()
        try:
            body = await read_body(request.stream(), request.headers.get("content-length"),
                                   settings.max_request_bytes, settings.body_timeout_s)
            accepted = True
            metrics.accepted += 1
            response = await asyncio.wait_for(work(request, body), settings.request_timeout_s)
        except ClientError as exc:
            response = error_response(exc.status, exc.message)
        except ClientDisconnect:  # the client hung up while sending: nobody to answer
            response = error_response(400, "the client disconnected before sending the whole body")
        except asyncio.TimeoutError:
            response = error_response(504, f"the prediction took longer than this server's limit of "
                                           f"{settings.request_timeout_s:g} s (serve.request_timeout_s)")
        except Exception as exc:  # a bug, not the client's doing: logged, answered, and the server goes on
            log.exception("%s failed", endpoint)
            response = error_response(500, f"the server failed to answer: {type(exc).__name__}: {exc}")
        finally:
            metrics.in_flight.dec()
        if accepted:
            metrics.answered += 1
        metrics.observe(endpoint, response.status_code, time.perf_counter() - started)
        return response

    async def one_row(request: Request, body: bytes) -> Response:
        fields = await parse_row(request.headers.get("content-type"), request.headers, body)
        # Files (base64 to decode, a path or URL to read where allowed) are checked off the loop
        # whatever the body's size: one request may only ever slow itself.
        checked = await off_loop(len(body), model.check_row, fields, blocks=model.reads_files)
        predicted = await runner.predict_row(checked)
        metrics.rows.labels("predict").inc()
        return json_response(predicted)

    async def many_rows(request: Request, body: bytes) -> Response:
        batch = await parse_batch(request.headers.get("content-type"), request.headers, body, settings.max_batch_rows)
        columns = await off_loop(len(body), model.check_batch, batch.columns, batch.files, blocks=model.reads_files)
        predicted = await runner.predict_batch(columns, batch.rows)
        metrics.rows.labels("batch_predict").inc(batch.rows)
        return await off_loop(len(body), batch_answer, batch, predicted)

    outputs = {p.name: p.type for p in model.predictor.outputs}

    async def explained(request: Request, body: bytes) -> Response:
        if not model.explains:
            raise ClientError(404, "/explain needs the model's gradients, and this server serves an ONNX export, which "
                                   "has none: serve the plait model folder it was exported from to explain predictions")
        asked = await explanations.parse_request(request.headers.get("content-type"), request.headers, body,
                                                 set(model.columns), settings.max_batch_rows)
        options = explanations.explain_options(request.query_params, asked.options, outputs)
        if asked.batch is None:
            checked = await off_loop(len(body), model.check_row, asked.row, blocks=model.reads_files)
            table = await runner.explain([[value] for value in checked], options)
            metrics.rows.labels("explain").inc()
            return json_response(explanations.row_answer(table, options))
        batch = asked.batch
        columns = await off_loop(len(body), model.check_batch, batch.columns, batch.files, blocks=model.reads_files)
        table = await runner.explain(columns, options)
        metrics.rows.labels("explain").inc(batch.rows)
        return json_response(await off_loop(len(body), explanations.batch_answer, batch, table))

    @app.get("/")
    async def alive() -> Response:
        return json_response(ALIVE)

    @app.get("/info")
    async def model_info() -> Response:
        return json_response(info)

    @app.post("/predict")
    async def predict(request: Request) -> Response:
        return await answer("predict", request, one_row)

    @app.post("/batch_predict")
    async def batch_predict(request: Request) -> Response:
        return await answer("batch_predict", request, many_rows)

    @app.post("/explain")
    async def explain(request: Request) -> Response:
        return await answer("explain", request, explained)

    @app.get("/metrics")
    async def prometheus() -> Response:
        return Response(metrics.exposition(), media_type=metrics.content_type)

    add_inference_protocol(app, model, runner, answer)
    if model.generator is not None:
        add_openai_api(app, model, runner, answer, metrics)
    return app


def add_openai_api(app: FastAPI, model: ServedModel, runner: Runner, answer: Callable, metrics: ServerMetrics) -> None:
    """OpenAI's completion endpoints over an LLM (``plait.serving.openai_api``), batched with
    each other by the runner."""
    name, created, limits, generator = model.name, int(time.time()), model.settings, model.generator

    def openai_error(status: int, message: str) -> Response:
        return json_response(openai_api.error_body(message, status), status)

    def checked(body: bytes, chat: bool) -> openai_api.CompletionRequest:
        asked = openai_api.parse_request(parse_json(body), chat, name, limits.max_tokens, limits.max_batch_size,
                                         generator.settings)
        try:
            generator.rows(asked.prompts)  # a template that reads other columns than the prompt's
        except PlaitError as exc:
            raise ClientError(400, f"prompt: {exc}") from None
        return asked

    def items(asked: openai_api.CompletionRequest, on_piece=None) -> list[openai_api.GenerationItem]:
        prompts = [prompt for prompt in asked.prompts for _ in range(asked.n)]
        return [openai_api.GenerationItem(prompt, asked.settings, None if on_piece is None else
                                          functools.partial(on_piece, index)) for index, prompt in enumerate(prompts)]

    async def complete(body: bytes, chat: bool) -> Response:
        asked = checked(body, chat)
        metrics.rows.labels("chat_completions" if chat else "completions").inc(len(asked.prompts) * asked.n)
        if asked.stream:
            return streamed(asked)
        done = await asyncio.gather(*(runner.generate(item) for item in items(asked)))
        choices = [openai_api.choice(asked, i, *openai_api.finished(g.text, g.finish_reason, asked.stops), delta=False)
                   for i, g in enumerate(done)]
        return json_response(openai_api.answer(asked, name, choices, _usage(asked, done), chunk=False))

    def streamed(asked: openai_api.CompletionRequest) -> StreamingResponse:
        loop = asyncio.get_running_loop()
        pieces: asyncio.Queue = asyncio.Queue()

        def on_piece(index: int, piece: str) -> None:  # on the model thread
            loop.call_soon_threadsafe(pieces.put_nowait, (index, piece))

        job = asyncio.gather(*(runner.generate(item) for item in items(asked, on_piece)))
        # Set after the pieces: the model thread hands them over before its batch returns.
        job.add_done_callback(lambda _: pieces.put_nowait(None))
        return StreamingResponse(_events(asked, name, job, pieces), media_type="text/event-stream")

    @app.get("/v1/models")
    async def models() -> Response:
        return json_response(openai_api.models_list(name, created))

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        return await answer("completions", request, lambda _, body: complete(body, chat=False), openai_error)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        return await answer("chat_completions", request, lambda _, body: complete(body, chat=True), openai_error)


def _usage(asked, done: list) -> dict:
    """Tokens read and written: each prompt once, every choice's text."""
    return openai_api.usage([g.prompt_tokens for g in done[::asked.n]], [g.tokens for g in done])


async def _events(asked, name: str, job: asyncio.Future, pieces: asyncio.Queue) -> AsyncIterator[bytes]:
    """The server-sent events of a streamed answer: a chunk per new piece of a choice's text
    (cut at a stop string), each choice's last chunk with its finish reason, the usage if asked,
    then ``[DONE]``."""
    count = len(asked.prompts) * asked.n
    texts = [openai_api.StopText(asked.stops) for _ in range(count)]

    def chunk(choices: list[dict], usage: dict | None = None) -> bytes:
        return _event(openai_api.answer(asked, name, choices, usage, chunk=True))

    if asked.chat:  # OpenAI's first chat chunk names the role
        yield chunk([{"index": i, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                      "finish_reason": None} for i in range(count)])
    while (item := await pieces.get()) is not None:
        index, piece = item
        shown = texts[index].add(piece)
        if shown:
            yield chunk([openai_api.choice(asked, index, shown, None, delta=True)])
    try:
        done = job.result()
    except Exception as exc:  # the headers are sent: the error is the stream's last event
        status = exc.status if isinstance(exc, ClientError) else 500
        if status == 500:
            log.error("a streamed completion failed: %s: %s", type(exc).__name__, exc)
        yield _event(openai_api.error_body(getattr(exc, "message", f"{type(exc).__name__}: {exc}"), status))
        return
    for index, (text, generated) in enumerate(zip(texts, done)):
        reason = "stop" if text.stopped else generated.finish_reason
        yield chunk([openai_api.choice(asked, index, text.rest() or None, reason, delta=True)])
    if asked.include_usage:
        yield chunk([], _usage(asked, done))
    yield b"data: [DONE]\n\n"


def _event(value: dict) -> bytes:
    return b"data: " + orjson.dumps(value) + b"\n\n"


def add_inference_protocol(app: FastAPI, model: ServedModel, runner: Runner, answer: Callable) -> None:
    """The Open Inference Protocol's endpoints (``inference_protocol``), over the same checks
    and runner as ``/batch_predict``."""
    from plait import __version__

    name = model.name
    metadata = oip.model_metadata(name, model.info(), model.output_datatypes())

    def the_model(asked: str) -> None:
        if asked != name:
            raise ClientError(404, f"there is no model {listed([asked])} on this server; it serves {listed([name])}")

    async def infer(request: Request, body: bytes) -> Response:
        batch, request_id, wanted = await off_loop(len(body), oip.parse_infer, body,
                                                   request.headers.get("content-type") or "", model.settings.max_batch_rows)
        columns = await off_loop(len(body), model.check_batch, batch.columns, blocks=model.reads_files)
        predicted = await runner.predict_batch(columns, batch.rows)
        return json_response(await off_loop(len(body), oip.infer_response, name, request_id, predicted, wanted))

    @app.get("/v2")
    async def server_metadata() -> Response:
        return json_response(oip.server_metadata(__version__))

    @app.get("/v2/health/live")
    async def live() -> Response:
        return json_response({"live": True})

    @app.get("/v2/health/ready")
    async def ready() -> Response:
        return json_response({"ready": True})

    def about_the_model(asked: str, answer_value: dict) -> Response:
        try:
            the_model(asked)
        except ClientError as exc:
            return error_response(exc.status, exc.message)
        return json_response(answer_value)

    @app.get("/v2/models/{asked}")
    async def model_metadata(asked: str) -> Response:
        return about_the_model(asked, metadata)

    @app.get("/v2/models/{asked}/ready")
    async def model_ready(asked: str) -> Response:
        return about_the_model(asked, {"name": name, "ready": True})

    @app.post("/v2/models/{asked}/infer")
    async def infer_endpoint(asked: str, request: Request) -> Response:
        async def work(request: Request, body: bytes) -> Response:
            the_model(asked)
            return await infer(request, body)

        return await answer("infer", request, work)


def batch_answer(batch: Batch, columns: dict[str, Any]) -> Response:
    """A batch's predictions in the shape it came in: records, or pandas "split" JSON."""
    names, rows = list(columns), zip(*columns.values())
    if batch.records:
        return json_response([dict(zip(names, row)) for row in rows])
    return json_response({"index": batch.index if batch.index is not None else list(range(batch.rows)),
                          "columns": names, "data": list(rows)})
