"""A JSON-RPC 2.0 peer over a byte transport: ordered, bounded, forgiving.

Both sides of ACP use this class: the client (the notebook) and agents written
here (the demo agent). What it promises, and why:

- Notifications are handled inline, in arrival order, by synchronous handlers
  (no task per message): a ``session/update`` stream cannot be reordered and
  costs no scheduling.
- Incoming *requests* may block (``terminal/wait_for_exit``, a permission
  waiting for a click), so each gets a task; ``$/cancel_request`` cancels it.
- Ids of both types; outgoing ids count from 0; the same id in flight both
  ways is fine, since the two directions are kept apart.
- Lines are bounded (:class:`~acp_kernel.protocol.framing.LineSplitter`); an oversized
  line or a non-JSON-RPC line is reported and skipped, never fatal.
- Handlers get ``params`` exactly as sent: ``_meta`` stays inside, it never
  becomes an argument that could override a real parameter.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from . import framing
from ..errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    REQUEST_CANCELLED,
    AgentStalled,
    ConnectionClosed,
    RequestTimeout,
    RpcError,
)
from .framing import NOTIFICATION, REQUEST, RESPONSE, Noise, Oversized, TooDeep
from .transport import Transport

log = logging.getLogger(__name__)

RequestHandler = Callable[[Any], Awaitable[Any]]
NotificationHandler = Callable[[Any], None]
Reporter = Callable[[str, str], None]


def _id_key(rid: Any) -> tuple[type, Any]:
    # 1 and "1" are different ids; so are 1 and True (classify rejects bools).
    return (type(rid), rid)


def _describe_validation(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            parts = []
            for err in errors()[:5]:
                loc = ".".join(str(p) for p in err.get("loc", ())) or "params"
                parts.append(f"{loc}: {err.get('msg')}")
            return "invalid params: " + "; ".join(parts)
        except Exception:  # pragma: no cover - defensive
            pass
    return f"invalid params: {exc}"


class Connection:
    """One JSON-RPC peer. Register handlers, :meth:`start`, then talk."""

    def __init__(
        self,
        transport: Transport,
        *,
        name: str = "peer",
        max_line: int = framing.DEFAULT_MAX_LINE,
        max_depth: int = framing.DEFAULT_MAX_DEPTH,
    ) -> None:
        self.transport = transport
        self.name = name
        self.max_depth = max_depth
        self._splitter = framing.LineSplitter(max_line)
        self._requests: dict[str, RequestHandler] = {}
        self._notifications: dict[str, NotificationHandler] = {}
        self._pending: dict[tuple[type, Any], asyncio.Future[Any]] = {}
        self._settle_hooks: dict[int, Callable[[Any], None]] = {}
        self._serving: dict[tuple[type, Any], asyncio.Task[Any]] = {}
        self._next_id = 0
        self._closed: asyncio.Future[ConnectionClosed] = asyncio.get_running_loop().create_future()
        self._write = transport.write
        #: Called with (kind, text) for everything worth telling a person:
        #: "noise", "oversized", "too-deep", "unknown-notification", "handler-error",
        #: "stray-response".
        self.on_report: Reporter = self._log_report
        #: Called for every notification without a registered handler.
        self.on_unknown_notification: Callable[[str, Any], None] | None = None
        #: Set by a client that takes plain text chunks typed: called with ``(session id,
        #: sessionUpdate, texts, messageId or None)`` for the lines :func:`.framing.typed_update`
        #: reads as text chunks, in place of the ``session/update`` handler with the params as
        #: dicts (errors reported the same).
        #: ``texts`` is a run: consecutive chunks of one session, kind and message id that came
        #: in one read (a burst, an agent catching up), so a client can take it as one piece.
        self.on_text_chunk: Callable[[str, str, list[str], str | None], None] | None = None
        #: Set by a client that takes tool call updates typed: called with a run of ``(session
        #: id, update, line)`` for the lines :func:`.framing.typed_update` reads as tool calls,
        #: in their place in the stream, in place of the ``session/update`` handler (errors
        #: reported the same). A run is the consecutive ones that came in one read.
        self.on_tool_update: Callable[[list[tuple[str, framing.ToolUpdate, bytes]]], None] | None = None
        self.noise_count = 0
        transport.attach(self._on_data, self._on_eof)
        transport.on_stall = self._on_stall
        transport.on_exit = self._on_exit

    # -- registration -------------------------------------------------------

    def on_request(self, method: str, handler: RequestHandler) -> None:
        self._requests[method] = handler

    def on_notification(self, method: str, handler: NotificationHandler) -> None:
        self._notifications[method] = handler

    async def start(self) -> None:
        await self.transport.start()

    # -- outgoing -----------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed.done()

    async def wait_closed(self) -> ConnectionClosed:
        return await asyncio.shield(self._closed)

    def _send(self, msg: dict[str, Any]) -> None:
        if self._closed.done():
            raise self._closed.result()
        try:
            self._write(framing.encode(msg))
        except (BrokenPipeError, ConnectionResetError, OSError) as exc:
            reason = ConnectionClosed(f"{self.name} closed its input ({exc})")
            self._close(reason)
            raise reason from exc

    def notify(self, method: str, params: Any = None) -> None:
        self._send(framing.notification(method, params))

    def send_request(
        self, method: str, params: Any = None, *, on_settle: Callable[[Any], None] | None = None
    ) -> tuple[int, asyncio.Future[Any]]:
        """Send a request; return its id and a future for the result.

        ``on_settle(result_or_exception)`` runs inline when the answer is read,
        before any later line is dispatched: a turn can end exactly where its
        response stands in the stream (a future's callbacks run a loop
        iteration later, after updates that follow the response).
        """
        rid = self._next_id
        self._next_id += 1
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[(int, rid)] = fut
        if on_settle is not None:
            self._settle_hooks[id(fut)] = on_settle
        try:
            self._send(framing.request(rid, method, params))
        except ConnectionClosed:
            self._pending.pop((int, rid), None)
            self._settle_hooks.pop(id(fut), None)
            if fut.done() and not fut.cancelled():
                fut.exception()  # failed by the close the write caused; the raise reports it
            raise
        return rid, fut

    def _settle(self, fut: asyncio.Future[Any], value: Any, is_error: bool) -> None:
        hook = self._settle_hooks.pop(id(fut), None)
        if fut.done():
            return
        if hook is not None:
            try:
                hook(value)
            except Exception:
                log.exception("settle hook failed")
        if is_error:
            fut.set_exception(value)
        else:
            fut.set_result(value)

    async def request(
        self, method: str, params: Any = None, *, timeout: float | None = None, setting: str = "request_seconds"
    ) -> Any:
        """Send a request and await its result; raises :class:`RpcError`,
        :class:`ConnectionClosed` or, after ``timeout`` seconds,
        :class:`RequestTimeout` naming ``limits.<setting>``. Cancelling the
        await (or the timeout) sends ``$/cancel_request``.

        Waits first while the agent's input queue is past its limit
        (backpressure): the queue never holds more than the limit plus one
        message."""
        await self.writable()
        rid, fut = self.send_request(method, params)
        try:
            if timeout is None:
                return await fut
            return await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            self._pending.pop((int, rid), None)
            self._settle_hooks.pop(id(fut), None)
            self._cancel_outgoing(rid)
            raise RequestTimeout(self.name, method, timeout or 0, setting, self.transport.exit_info()[1]) from None
        except asyncio.CancelledError:
            self._pending.pop((int, rid), None)
            self._settle_hooks.pop(id(fut), None)
            if fut.done() and not fut.cancelled():
                fut.exception()  # answered just before the cancel: nobody will read it, don't log it
            else:
                self._cancel_outgoing(rid)
            raise

    def _cancel_outgoing(self, rid: int) -> None:
        if not self._closed.done():
            try:
                self.notify("$/cancel_request", {"requestId": rid})
            except ConnectionClosed:
                pass

    async def writable(self) -> None:
        """Wait until the agent's input queue is under its limit (returns at
        once on transports without one). Raises the close reason if the
        connection closed meanwhile (e.g. the agent stalled)."""
        await self.transport.drain()
        if self._closed.done():
            raise self._closed.result()

    def _on_stall(self, waiting: int) -> None:
        """The transport says the agent stopped reading: report it and close,
        failing every pending request with the reason (nothing waits forever)."""
        seconds = self.transport.write_stall_seconds
        reason = AgentStalled(
            f"{self.name} stopped reading its input: {waiting:,} bytes have waited for it for {seconds:g} s "
            "(limits.write_stall_seconds, limits.write_buffer_bytes); it is not sent anything more",
            stderr=self.transport.exit_info()[1],
        )
        self.on_report("stalled", str(reason))
        self._close(reason)

    def _on_exit(self, returncode: int | None) -> None:
        """The agent process exited but its output is still open (a process
        it started holds it): nothing more can come; fail what waits now."""
        self._close(ConnectionClosed(
            f"{self.name} exited (a process it started still held its output; that process was ended)",
            returncode=returncode, stderr=self.transport.exit_info()[1],
        ))

    # -- incoming -----------------------------------------------------------

    def _on_data(self, data: bytes) -> None:
        # The hot loop: a notification with a handler (the update stream's
        # every line) is handled here, in one frame; the rest goes to _dispatch.
        classify, depth, handlers = framing.classify, self.max_depth, self._notifications
        typed, on_text, on_tool = framing.typed_update, self.on_text_chunk, self.on_tool_update
        take = on_text is not None or on_tool is not None
        text_type = framing.TextChunk
        texts: list[str] = []  # the run of plain text chunks (one session, kind, message id) not yet handed on
        tools: list[tuple[str, framing.ToolUpdate, bytes]] = []  # the run of tool updates not yet handed on
        sid = kind = ""
        mid: Any = None
        for line in self._splitter.feed(data):
            if take and type(line) is bytes:
                got = typed(line, depth)
                if got is not None:
                    update = got[1]
                    if isinstance(update, text_type):
                        if on_text is not None:
                            if tools:
                                self._on_tools(tools)
                                tools = []
                            if texts and (got[0] != sid or update.sessionUpdate != kind or update.messageId != mid):
                                self._on_texts(sid, kind, texts, mid)
                                texts = []
                            sid, kind, mid = got[0], update.sessionUpdate, update.messageId
                            texts.append(update.content.text)
                            continue
                    elif on_tool is not None:
                        if texts:
                            self._on_texts(sid, kind, texts, mid)
                            texts = []
                        tools.append((got[0], update, line))
                        continue
            if texts:
                self._on_texts(sid, kind, texts, mid)
                texts = []
            if tools:
                self._on_tools(tools)
                tools = []
            if isinstance(line, Oversized):
                self._report_oversized(line)
                continue
            parsed = classify(line, depth)
            if type(parsed) is tuple and parsed[0] == NOTIFICATION:
                msg = parsed[1]
                handler = handlers.get(msg["method"])
                if handler is not None:
                    try:
                        handler(msg.get("params"))
                    except Exception as exc:
                        self._handler_failed(msg["method"], exc)
                    continue
            self._dispatch_parsed(parsed)
        if texts:
            self._on_texts(sid, kind, texts, mid)
        if tools:
            self._on_tools(tools)

    def _on_texts(self, sid: str, kind: str, texts: list[str], mid: Any) -> None:
        try:  # (an unset messageId is None)
            self.on_text_chunk(sid, kind, texts, None if mid is msgspec.UNSET else mid)  # type: ignore[misc]  # set: runs are made only then
        except Exception as exc:
            self._handler_failed("session/update", exc)

    def _on_tools(self, run: list[tuple[str, framing.ToolUpdate, bytes]]) -> None:
        try:
            self.on_tool_update(run)  # type: ignore[misc]  # set: runs are made only then
        except Exception as exc:
            self._handler_failed("session/update", exc)

    def _handler_failed(self, method: str, exc: Exception) -> None:
        log.exception("notification handler for %s failed", method)
        self.on_report("handler-error", f"{method}: {type(exc).__name__}: {exc}")

    def _dispatch(self, line: bytes) -> None:
        self._dispatch_parsed(framing.classify(line, self.max_depth))

    def _dispatch_parsed(self, parsed: tuple[int, dict[str, Any]] | Noise | TooDeep) -> None:
        if type(parsed) is Noise:
            self.noise_count += 1
            self.on_report("noise", f"{parsed.reason}: {parsed.preview()}")
            return
        if type(parsed) is TooDeep:
            self._refuse_deep(parsed)
            return
        kind, msg = parsed  # type: ignore[misc]
        if kind == NOTIFICATION:
            method = msg["method"]
            handler = self._notifications.get(method)
            if handler is not None:
                try:
                    handler(msg.get("params"))
                except Exception as exc:
                    self._handler_failed(method, exc)
            elif method == "$/cancel_request":
                self._cancel_incoming(msg.get("params"))
            elif self.on_unknown_notification is not None:
                self.on_unknown_notification(method, msg.get("params"))
            else:
                log.debug("ignored notification %s", method)
        elif kind == RESPONSE:
            fut = self._pending.pop(_id_key(msg["id"]), None)
            if fut is None:
                self.on_report("stray-response", f"response to unknown request id {msg['id']!r}")
            elif "error" in msg and msg["error"] is not None:
                self._settle(fut, RpcError.from_dict(msg["error"]), True)
            else:
                self._settle(fut, msg.get("result"), False)
        elif kind == REQUEST:
            rid = msg["id"]
            key = _id_key(rid)
            serve = self._requests.get(msg["method"])
            if serve is None:
                self._reply_error(rid, METHOD_NOT_FOUND, f"method not found: {msg['method']}")
                return
            if key in self._serving:
                self._reply_error(rid, INTERNAL_ERROR, f"request id {rid!r} is already in use")
                return
            task = asyncio.get_running_loop().create_task(self._serve(rid, msg["method"], serve, msg.get("params")))
            self._serving[key] = task
            task.add_done_callback(functools.partial(self._served, rid=rid, key=key))

    async def _serve(self, rid: Any, method: str, handler: RequestHandler, params: Any) -> None:
        key = _id_key(rid)
        try:
            value = await handler(params)
            await self.transport.drain()  # backpressure: answers wait for room too
        except asyncio.CancelledError:
            self._serving.pop(key, None)
            if not self._closed.done():
                self._reply_error(rid, REQUEST_CANCELLED, "request cancelled")
            return
        except RpcError as exc:
            self._serving.pop(key, None)
            self._reply(framing.error(rid, exc.code, exc.message, exc.data))
            return
        except Exception as exc:
            self._serving.pop(key, None)
            if type(exc).__name__ == "ValidationError":
                self._reply_error(rid, INVALID_PARAMS, _describe_validation(exc))
            else:
                log.exception("handler for %s failed", method)
                self.on_report("handler-error", f"{method}: {type(exc).__name__}: {exc}")
                self._reply_error(rid, INTERNAL_ERROR, f"{type(exc).__name__}: {exc}")
            return
        self._serving.pop(key, None)
        self._reply(framing.result(rid, value))

    def _refuse_deep(self, item: TooDeep) -> None:
        """A message too deep to decode safely: answer a request, fail the
        request a response was for (else its awaiter would hang), report."""
        what = item.describe()
        if item.method is not None and item.has_id:
            self.on_report("too-deep", f"refused request {item.method!r} (id {item.id!r}): {what}")
            self._reply_error(item.id, INVALID_REQUEST, f"refused: {what}")
        elif item.has_id:
            fut = self._pending.pop(_id_key(item.id), None)
            self.on_report("too-deep", f"refused the answer to request id {item.id!r}: {what}")
            if fut is not None:
                self._settle(fut, RpcError(INVALID_REQUEST, f"the {self.name}'s answer was refused: {what}"), True)
        else:
            name = f" {item.method!r}" if item.method is not None else ""
            self.on_report("too-deep", f"skipped a notification{name}: {what}")

    def _served(self, task: asyncio.Task[Any], rid: Any, key: tuple[type, Any]) -> None:
        # A task cancelled before its first step never enters _serve's body
        # (e.g. $/cancel_request in the same read as the request): answer here.
        if task.cancelled() and self._serving.get(key) is task:
            del self._serving[key]
            if not self._closed.done():
                self._reply_error(rid, REQUEST_CANCELLED, "request cancelled")

    def _reply_error(self, rid: Any, code: int, message: str) -> None:
        self._reply(framing.error(rid, code, message))

    def _reply(self, msg: dict[str, Any]) -> None:
        try:
            self._send(msg)
        except ConnectionClosed:
            pass
        except (TypeError, ValueError) as exc:
            # The handler's result (or error data) is not JSON: still answer, once.
            self.on_report("handler-error", f"answer to request {msg.get('id')!r} is not JSON-serializable: {exc}")
            self._reply_error(msg.get("id"), INTERNAL_ERROR, f"the client's answer could not be encoded: {exc}")

    def _cancel_incoming(self, params: Any) -> None:
        if isinstance(params, dict) and "requestId" in params:
            task = self._serving.get(_id_key(params["requestId"]))
            if task is not None:
                task.cancel()

    def _report_oversized(self, item: Oversized) -> None:
        self.on_report("oversized", f"skipped a {item.size:,}-byte line (over the {self._splitter.max_line:,}-byte limit)")

    def _log_report(self, kind: str, text: str) -> None:
        log.warning("%s: %s: %s", self.name, kind, text)

    def _on_eof(self) -> None:
        for line in self._splitter.flush():
            if not isinstance(line, Oversized):
                self._dispatch(line)
        if self._closed.done():
            return
        # The exit status usually follows stdout's EOF by a moment: wait for it
        # briefly so the error can say how the agent ended.
        asyncio.get_running_loop().create_task(self._finish_eof())

    async def _finish_eof(self) -> None:
        exited = self.transport.exited
        if exited is not None and not exited.done():
            try:
                await asyncio.wait_for(asyncio.shield(exited), 0.5)
            except asyncio.TimeoutError:
                pass
        code, stderr = self.transport.exit_info()
        self._close(ConnectionClosed(f"{self.name} closed its output", returncode=code, stderr=stderr))

    def _close(self, reason: ConnectionClosed) -> None:
        if self._closed.done():
            return
        self._closed.set_result(reason)
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            self._settle(fut, reason, True)
        for task in list(self._serving.values()):
            task.cancel()

    async def close(self, **kwargs: Any) -> None:
        """Close the transport (for a process: stdin, grace, then the tree)."""
        try:
            await self.transport.close(**kwargs)
        finally:
            code, stderr = self.transport.exit_info()
            self._close(ConnectionClosed(f"{self.name} connection closed", returncode=code, stderr=stderr))
