"""Request-size limit: an ASGI middleware answering 413 (problem+json) for bodies above the limit.

The body is read up front, counting bytes as they arrive, so a client that
sends no ``Content-Length`` (chunked transfer) is cut off at the limit too;
a declared ``Content-Length`` above the limit is refused before reading.
Bodies within the limit are replayed to the app unchanged.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.problems import problem_response


class BodySizeLimit:
    def __init__(self, app: ASGIApp, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = next((v for k, v in scope.get("headers", ()) if k == b"content-length"), None)
        if declared is not None:
            try:
                too_big = int(declared) > self.max_bytes
            except ValueError:
                too_big = False
            if too_big:
                await self._refuse(scope, receive, send)
                return
        if scope.get("method") in ("GET", "HEAD", "OPTIONS", "DELETE") and declared is None:
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body = message.get("body", b"")
            size += len(body)
            if size > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = problem_response(
            413, "request_too_large", f"the request body exceeds the limit of {self.max_bytes} bytes",
            instance=scope.get("path"), headers={"Connection": "close"},
        )
        await response(scope, receive, send)
