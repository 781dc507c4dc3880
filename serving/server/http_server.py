"""The REST port's HTTP/1.1 transport: one event loop for every connection, a bounded pool for requests.

A connection costs no thread: an asyncio loop reads request lines, headers and bodies for
all of them, each read under a deadline, and only a complete request is handed to a pool
of `workers` threads (where the engine runs). So a client that opens a connection and
sends half a header, or a body one byte a minute, holds a few kilobytes of memory until
its deadline, never a worker. `max_connections` caps them all: at the cap, the connection
that has waited longest for its request head is closed to make room (so stalled clients
cannot lock out live ones), and only when every connection is busy is a new one answered 503.
Bodies held in memory at once are bounded too (`body_budget_bytes`, default 4 request bodies
of the maximum size): a body that does not fit waits, and is answered 503 after half of
`body_timeout_s`.

Everything the HTTP layer refuses itself is answered as TF Serving's REST API answers
errors, JSON `{"error": "..."}`: 400 (bad request line or header), 408 (header or body not
received in time; a Transfer-Encoding that does not end in chunked, never read by a
Content-Length beside it), 411 (no Content-Length, or a chunked body), 413 (body over the limit),
414 (request line over 8 KiB), 415 (a Content-Encoding other than gzip), 431 (headers over 64 KiB
or 100 lines), 503 (connection cap reached). HEAD gets the status and headers of the same request without the
body. Content-Length is ASCII digits only, of any number (10^30 is a body over the limit, 413). A
`Content-Encoding: gzip` body is decompressed, as TF Serving's HTTP server does, in a worker thread
and never past `max_request_bytes` (`gunzip`); it holds its bound on the decompressed size (1,032 x
its length at most) in the body budget. Answers are encoded in the worker too (`RestService.respond`),
so one that cannot be encoded is a 500 answer, never a connection closed without one.

Example (loopback, any free port):

    rest = RestServer(engine, host="127.0.0.1", port=0).start()   # engine: a started InferenceEngine
    # curl -d '{"instances": ["great movie"]}' http://127.0.0.1:{rest.port}/v1/models/sentiment:predict
    rest.stop(grace_s=10)
"""

from __future__ import annotations

import asyncio
import logging
import re
import socket
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor

from serving.server.batching import CLIENT_ALIVE
from serving.server.rest_service import RestService, encode_payload

logger = logging.getLogger(__name__)

MAX_REQUEST_LINE = 8 << 10
MAX_HEADER_BYTES = 64 << 10
MAX_HEADER_LINES = 100
# Content-Length is ASCII digits only: str.isdigit() also takes "²" and "９", which int() refuses or reads.
_CONTENT_LENGTH = re.compile(r"[0-9]+")
# A length of more digits (leading zeros aside) is over any limit: read as this, never int() of a 64 KiB number.
_LENGTH_DIGITS = 18
_BEYOND_ANY_LIMIT = 10 ** _LENGTH_DIGITS
# The most deflate can expand: 1032 bytes out per byte in (zlib's documented worst case).
_GZIP_RATIO = 1032
_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
            408: "Request Timeout", 409: "Conflict", 411: "Length Required", 413: "Content Too Large",
            414: "URI Too Long", 415: "Unsupported Media Type", 429: "Too Many Requests", 431: "Request Header Fields Too Large",
            499: "Client Closed Request", 500: "Internal Server Error", 501: "Not Implemented",
            503: "Service Unavailable", 504: "Gateway Timeout"}


class _Refused(Exception):
    """The HTTP layer answers this request itself and closes the connection."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


class RestServer:
    """TF Serving's REST API on an asyncio HTTP/1.1 server with a bounded worker pool.

    Args:
        engine: a started `InferenceEngine` (or an object with the methods `RestService` uses).
        host: address to listen on ("127.0.0.1" = this machine only; "0.0.0.0" = every interface).
        port: TCP port; 0 picks a free one (read it back from `.port`).
        max_request_bytes: bodies larger than this answer 413 without being read.
        ssl_context: an `ssl.SSLContext` (server side, certificate loaded) for HTTPS, or None.
        idle_timeout_s: a keep-alive connection with no new request for this long is closed.
        metrics: optional `serving.server.server.ServerMetrics`.
        workers: threads answering requests (the engine calls); more requests wait their turn.
        max_connections: open connections at most (see the module docstring).
        header_timeout_s: the request line and headers must arrive within this time (TLS
            handshake included).
        body_timeout_s: the body must arrive within this time after the headers.
        body_budget_bytes: request bodies held in memory at once, in bytes (default
            4 x max_request_bytes).
    """

    def __init__(self, engine, *, host="127.0.0.1", port=8501, max_request_bytes=64 << 20, ssl_context=None,
                 idle_timeout_s=120.0, metrics=None, workers=32, max_connections=1000, header_timeout_s=10.0,
                 body_timeout_s=60.0, body_budget_bytes=None):
        self.service = RestService(engine, metrics, decode_budget_bytes=body_budget_bytes or 4 * max_request_bytes)
        self.host = host
        self.max_request_bytes = max_request_bytes
        self.ssl_context = ssl_context
        self.idle_timeout_s = idle_timeout_s
        self.max_connections = max_connections
        self.header_timeout_s = header_timeout_s
        self.body_timeout_s = body_timeout_s
        self.workers = workers
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._socket = socket.create_server((host, port), family=family, backlog=1024)
        self.port = self._socket.getsockname()[1]
        self.scheme = "https" if ssl_context is not None else "http"
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rest")
        self._loop = None
        self._server = None
        self._thread = None
        self._writers = set()
        self._waiting = {}  # writer -> None, oldest first: connections waiting for a request head
        self.body_budget_bytes = body_budget_bytes or 4 * max_request_bytes
        self._body_bytes = 0
        self._body_room = None  # asyncio.Condition, made on the loop
        self._idle = threading.Condition()
        self._in_flight = 0

    @property
    def url(self):
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    @property
    def connections(self) -> int:
        """Open connections now."""
        return len(self._writers)

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self):
        """Serves in a background thread (one event loop); returns self."""
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        def run():
            asyncio.set_event_loop(self._loop)
            self._body_room = asyncio.Condition()
            self._server = self._loop.run_until_complete(asyncio.start_server(
                self._connection, sock=self._socket, ssl=self.ssl_context, limit=MAX_HEADER_BYTES,
                ssl_handshake_timeout=self.header_timeout_s if self.ssl_context else None))
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name=f"rest-{self.port}", daemon=True)
        self._thread.start()
        ready.wait(30)
        return self

    def stop(self, grace_s=10.0):
        """Stops accepting, lets in-flight requests finish (up to `grace_s`), then closes every connection.

        Returns True when every in-flight request finished in time.
        """
        self.service.draining = True
        if self._loop is None:
            self._socket.close()
            return True
        self._loop.call_soon_threadsafe(self._server.close)  # new connections are refused from here on
        deadline = time.monotonic() + grace_s
        with self._idle:
            drained = self._idle.wait_for(lambda: self._in_flight == 0, max(0.0, deadline - time.monotonic()))

        def close_all():
            for writer in list(self._writers):
                writer.close()
            for task in asyncio.all_tasks(self._loop):
                task.cancel()  # connections waiting for a request end now, quietly
            self._loop.call_later(0.05, self._loop.stop)

        self._loop.call_soon_threadsafe(close_all)
        self._thread.join(5)
        if not self._thread.is_alive():
            self._loop.close()
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._loop = None
        return drained

    # -- one connection ---------------------------------------------------------------------------
    async def _connection(self, reader, writer):
        if len(self._writers) >= self.max_connections:
            if not self._waiting:
                await self._write(writer, 503, *self._error_body(
                    f"too many connections (limit {self.max_connections}); retry later"), close=True)
                writer.close()
                return
            victim = next(iter(self._waiting))  # the longest wait for a request: make room
            del self._waiting[victim]
            victim.close()
        self._writers.add(writer)
        held = 0
        try:
            first = True
            while not self.service.draining or first:
                idle, first = not first, False
                timeout = self.idle_timeout_s if idle else self.header_timeout_s
                self._waiting[writer] = None
                try:
                    request = await asyncio.wait_for(self._read_head(reader), timeout)
                except asyncio.TimeoutError:
                    if idle:
                        return  # an idle keep-alive connection: just close it
                    raise _Refused(408, f"request headers not received within {timeout:g} s") from None
                finally:
                    self._waiting.pop(writer, None)
                if request is None:
                    return  # the client closed the connection
                method, target, headers, keep_alive = request
                length = self._content_length(method, headers)
                coding = self._encoding(headers)
                held = await self._reserve_body(self._held_for(length, coding)) \
                    if length <= self.max_request_bytes else 0
                body = await self._read_body(reader, writer, headers, length)
                status, content_type, data = await self._answer(method, target, body, coding,
                                                                alive=_client_waits(reader, writer))
                del body
                keep_alive = keep_alive and not self.service.draining
                await self._write(writer, status, content_type, data, close=not keep_alive, head=method == "HEAD")
                held = await self._release_body(held)
                if not keep_alive:
                    return
        except _Refused as refused:
            await self._write(writer, refused.status, *self._error_body(refused.message), close=True)
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:  # stop(): end quietly (3.11's stream callback logs a cancelled task)
            pass
        except Exception:  # noqa: BLE001 - one connection must never stop the loop
            logger.exception("REST connection failed")
        finally:
            self._writers.discard(writer)
            self._waiting.pop(writer, None)
            if held:
                self._body_bytes -= held  # the loop is single-threaded: no lock needed to give back
                asyncio.ensure_future(self._notify_body_room())
            writer.close()

    async def _notify_body_room(self):
        async with self._body_room:
            self._body_room.notify_all()

    async def _reserve_body(self, length):
        """Wait until `length` more body bytes fit the budget; returns the bytes held."""
        if length < (1 << 16):
            return 0  # small bodies are not worth the bookkeeping
        def fits():
            return self._body_bytes == 0 or self._body_bytes + length <= self.body_budget_bytes

        async with self._body_room:
            try:
                await asyncio.wait_for(self._body_room.wait_for(fits), self.body_timeout_s / 2)
            except asyncio.TimeoutError:
                raise _Refused(503, "the server is reading too many large request bodies; retry later") from None
            self._body_bytes += length
        return length

    async def _release_body(self, held):
        if held:
            self._body_bytes -= held
            await self._notify_body_room()
        return 0

    async def _read_head(self, reader):
        """(method, target, headers, keep_alive) or None at EOF; _Refused for what HTTP rejects."""
        try:
            line = await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as error:
            if not error.partial:
                return None
            raise _Refused(400, "incomplete request line") from None
        except asyncio.LimitOverrunError:
            raise _Refused(414, f"request line is over {MAX_REQUEST_LINE} bytes") from None
        if len(line) > MAX_REQUEST_LINE:
            raise _Refused(414, f"request line is over {MAX_REQUEST_LINE} bytes")
        parts = line.decode("latin-1").rstrip("\r\n").split(" ")
        if len(parts) != 3 or not parts[0].isalpha() or not parts[2].startswith("HTTP/1."):
            raise _Refused(400, "bad request line: expected 'METHOD /path HTTP/1.1'")
        method, target, version = parts
        headers = {}
        size = 0
        for _ in range(MAX_HEADER_LINES + 1):
            try:
                raw = await reader.readuntil(b"\n")
            except asyncio.LimitOverrunError:
                raise _Refused(431, f"request headers are over {MAX_HEADER_BYTES} bytes") from None
            size += len(raw)
            if size > MAX_HEADER_BYTES:
                raise _Refused(431, f"request headers are over {MAX_HEADER_BYTES} bytes")
            text = raw.decode("latin-1").rstrip("\r\n")
            if not text:
                break
            name, colon, value = text.partition(":")
            if not colon or not name or name != name.strip():
                raise _Refused(400, "bad header line: expected 'Name: value'")
            name = name.lower()
            value = value.strip()
            if name == "content-length" and headers.get(name, value) != value:
                raise _Refused(400, "conflicting Content-Length headers")
            if name == "transfer-encoding" and name in headers:  # one framing, or a proxy could read another
                raise _Refused(400, "repeated Transfer-Encoding headers")
            headers[name] = value
        else:
            raise _Refused(431, f"more than {MAX_HEADER_LINES} header lines")
        connection = headers.get("connection", "").lower()
        keep_alive = "close" not in connection if version == "HTTP/1.1" else "keep-alive" in connection
        return method.upper(), target, headers, keep_alive

    def _content_length(self, method, headers):
        # RFC 9112 6.1 / 6.3: Transfer-Encoding overrides Content-Length, so a body framed by a
        # coding is never read by its Content-Length (a proxy in front would frame it otherwise:
        # request smuggling). This server reads Content-Length bodies only.
        coding = headers.get("transfer-encoding")
        if coding is not None:
            if [c.strip().lower() for c in coding.split(",")][-1] == "chunked":
                raise _Refused(411, "chunked request bodies are not accepted: send a Content-Length header")
            # Not chunked last: the body's length cannot be known, and RFC 9112 says 400.
            raise _Refused(400, f"Transfer-Encoding {coding[:40]!r} does not end in chunked, so the body's "
                                "length is unknown: send the body with a Content-Length header only "
                                "(compress it with Content-Encoding: gzip)")
        length = headers.get("content-length")
        if length is None:
            if method == "POST":
                raise _Refused(411, "POST needs a Content-Length header")
            return 0
        if not _CONTENT_LENGTH.fullmatch(length):
            raise _Refused(400, f"bad Content-Length header: {length[:40]!r} (expected ASCII digits)")
        digits = length.lstrip("0") or "0"
        if len(digits) > _LENGTH_DIGITS:  # too large, not malformed: 413 in _read_body
            return max(_BEYOND_ANY_LIMIT, self.max_request_bytes + 1)
        return int(digits)

    @staticmethod
    def _encoding(headers):
        """"gzip" or "" (identity) from Content-Encoding; _Refused 415 for any other coding."""
        coding = headers.get("content-encoding", "").strip().lower()
        if coding in ("", "identity"):
            return ""
        if coding in ("gzip", "x-gzip"):
            return "gzip"
        raise _Refused(415, f"Content-Encoding {coding[:40]!r} is not supported (send gzip or an uncompressed body)")

    def _held_for(self, length, coding):
        """Body bytes a request may hold in memory: a gzip body up to what it can decompress to."""
        return min(length * _GZIP_RATIO, self.max_request_bytes) if coding else length

    async def _read_body(self, reader, writer, headers, length):
        if not length:
            return b""
        if length > self.max_request_bytes:
            digits = headers["content-length"].lstrip("0")  # the client's number, also past _LENGTH_DIGITS
            shown = digits if len(digits) <= 40 else f"{digits[:20]}... ({len(digits)} digits)"
            await self._write(writer, 413, *self._error_body(
                f"request body of {shown} bytes exceeds the server limit of {self.max_request_bytes} bytes "
                "(RESOURCE_EXHAUSTED; raise --max-request-bytes)"), close=True)
            await self._discard(reader, length)
            raise ConnectionResetError  # answered: just close
        if headers.get("expect", "").lower() == "100-continue":
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        try:
            return await asyncio.wait_for(reader.readexactly(length), self.body_timeout_s)
        except asyncio.TimeoutError:
            raise _Refused(408, f"request body of {length} bytes not received within {self.body_timeout_s:g} s") \
                from None

    @staticmethod
    async def _discard(reader, length, seconds=2.0):
        """Drops what the client still sends (bounded in time) so that it reads the 413, not a reset."""
        deadline = time.monotonic() + seconds
        try:
            while length > 0 and time.monotonic() < deadline:
                chunk = await asyncio.wait_for(reader.read(min(length, 1 << 16)), 0.25)
                if not chunk:
                    return
                length -= len(chunk)
        except (asyncio.TimeoutError, ConnectionError, OSError):
            pass

    async def _answer(self, method, target, body, coding="", alive=None):
        """(status, content type, body bytes) from a worker thread: decompressing, handling and encoding
        all run there, off the event loop. `alive`: whether the client still waits (see `batching`)."""
        with self._idle:
            self._in_flight += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(
                self._pool, self._respond_for, alive, method, target, body, coding)
        finally:
            with self._idle:
                self._in_flight -= 1
                self._idle.notify_all()

    def _respond_for(self, alive, *request):
        token = CLIENT_ALIVE.set(alive)  # a pool thread serves many connections: set for this one only
        try:
            return self._respond(*request)
        finally:
            CLIENT_ALIVE.reset(token)

    def _respond(self, method, target, body, coding):
        if coding == "gzip":
            try:
                body = gunzip(body, self.max_request_bytes)
            except _Refused as refused:
                return (refused.status, *self._error_body(refused.message))
        return self.service.respond(method, target, body)

    @staticmethod
    def _error_body(message):
        """(content type, bytes) of TF Serving's error body {"error": message}; never fails to encode."""
        return encode_payload({"error": message})

    async def _write(self, writer, status, content_type, data, *, close, head=False):
        lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}", f"Content-Type: {content_type}",
                 f"Content-Length: {len(data)}", "Server: bert-keras-serving"]
        if close:
            lines.append("Connection: close")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (b"" if head else data))
        try:
            await asyncio.wait_for(writer.drain(), self.body_timeout_s)
        except (asyncio.TimeoutError, ConnectionError, OSError):
            writer.close()


def _client_waits(reader, writer):
    """Whether the client of a connection still waits for its answer: not once it has closed the
    connection (end of stream read, or the transport lost). As Go's HTTP server cancels a
    request's context when its client closes; a client that only shuts down its sending half
    while it waits counts as gone too (HTTP gives no way to tell the two apart)."""
    return lambda: not (reader.at_eof() or writer.is_closing())


def gunzip(data: bytes, limit: int) -> bytes:
    """The decompressed body of a `Content-Encoding: gzip` request, never more than `limit` bytes.

    TF Serving's HTTP server decompresses gzip bodies. The output is bounded while it is
    produced (`max_length`), so a small body that would expand to gigabytes (a zip bomb) is
    refused after `limit` bytes, never held whole. Concatenated gzip members are read as one
    body, as `gzip -d` does.

    Raises:
        _Refused: 400 for data that is not gzip (or is truncated), 413 past `limit`.
    """
    # At most a MiB per call: zlib's one call of `limit` bytes builds its output in blocks and copies
    # them into one string, twice the limit at its peak (a bomb grew the server by 128 MB at 64 MB).
    out, size, step = [], 0, 1 << 20
    while data:
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            while not inflater.eof:
                chunk = inflater.decompress(data, min(step, limit + 1 - size))
                size += len(chunk)
                out.append(chunk)
                if size > limit:
                    raise _Refused(413, f"gzip request body decompresses to more than the server limit of {limit} "
                                        "bytes (RESOURCE_EXHAUSTED; raise --max-request-bytes)")
                data = inflater.unconsumed_tail
                if not chunk and not data and not inflater.eof:  # nothing left before the member's end
                    raise _Refused(400, "gzip request body is truncated")
        except zlib.error as error:
            raise _Refused(400, f"Content-Encoding gzip, but the body is not valid gzip data ({error})") from None
        data = inflater.unused_data
    return b"".join(out)
