"""Typed exceptions. An error the hub answered carries its `_tag`, `code`,
`message` and `data`; match on the class (one per tag) or on `.tag`.
"""

from __future__ import annotations

import builtins
from typing import Any


class SwitchboardError(Exception):
    """Every error this SDK raises."""


class RpcError(SwitchboardError):
    """The hub answered a call with a JSON-RPC error object."""

    tag: str = "RpcError"

    def __init__(self, code: int, message: str, tag: str | None = None, data: Any = None):
        super().__init__(f"{tag or self.tag} ({code}): {message}")
        self.code = code
        self.message = message
        self.tag = tag or self.tag
        self.data = data

    @classmethod
    def from_object(cls, obj: Any) -> "RpcError":
        """The exception for a wire error object; unknown tags stay RpcError."""
        if not isinstance(obj, dict):
            return RpcError(-32603, f"malformed error object: {obj!r}", "InternalError")
        tag = obj.get("_tag")
        kind = _BY_TAG.get(tag, RpcError) if isinstance(tag, str) else RpcError
        return kind(int(obj.get("code", 0)), str(obj.get("message", "")), tag, obj.get("data"))

    def to_object(self) -> dict[str, Any]:
        obj: dict[str, Any] = {"code": self.code, "message": self.message, "_tag": self.tag}
        if self.data is not None:
            obj["data"] = self.data
        return obj


def _tagged(name: str, code: int, *bases: type) -> type[RpcError]:
    return type(
        name, (RpcError, *bases), {"tag": name, "default_code": code, "__doc__": f"`_tag` {name} ({code})."}
    )


ParseError = _tagged("ParseError", -32700)
InvalidRequestError = _tagged("InvalidRequestError", -32600)
MethodNotFoundError = _tagged("MethodNotFoundError", -32601)
InvalidParamsError = _tagged("InvalidParamsError", -32602)
InternalError = _tagged("InternalError", -32603)
UnauthorizedError = _tagged("UnauthorizedError", -32001)
ForbiddenError = _tagged("ForbiddenError", -32003)
NotFoundError = _tagged("NotFoundError", -32004)
ConflictError = _tagged("ConflictError", -32009)
RateLimitedError = _tagged("RateLimitedError", -32029)
#: The hub's deadline passed (a gate's hook, for example); also a builtin TimeoutError.
TimeoutError = _tagged("TimeoutError", -32008, builtins.TimeoutError)
UnavailableError = _tagged("UnavailableError", -32010)
UnsupportedVersionError = _tagged("UnsupportedVersionError", -32011)
ShuttingDownError = _tagged("ShuttingDownError", -32012)
ResyncRequiredError = _tagged("ResyncRequiredError", -32013)

_BY_TAG: dict[str, type[RpcError]] = {
    k.tag: k
    for k in (
        ParseError,
        InvalidRequestError,
        MethodNotFoundError,
        InvalidParamsError,
        InternalError,
        UnauthorizedError,
        ForbiddenError,
        NotFoundError,
        ConflictError,
        RateLimitedError,
        TimeoutError,
        UnavailableError,
        UnsupportedVersionError,
        ShuttingDownError,
        ResyncRequiredError,
    )
}


class CallTimeoutError(SwitchboardError, builtins.TimeoutError):
    """No answer within the SDK's own call deadline."""


class DisconnectedError(SwitchboardError):
    """The socket closed before the answer came (or the client gave up reconnecting)."""

    def __init__(self, message: str = "the connection is closed", code: int | None = None, reason: str = ""):
        super().__init__(message if code is None else f"{message} (close {code} {reason})".rstrip())
        self.close_code = code
        self.close_reason = reason


class BadResultError(SwitchboardError):
    """The answer does not match the method's result model."""


class HttpError(SwitchboardError):
    """A REST call answered a non-2xx status; `code` is the hub's `error.code`."""

    def __init__(self, status: int, body: Any):
        err = body.get("error") if isinstance(body, dict) else None
        self.status = status
        self.body = body
        self.code = err.get("code") if isinstance(err, dict) else None
        self.message = err.get("message") if isinstance(err, dict) else str(body)
        super().__init__(f"HTTP {status} {self.code}: {self.message}")
