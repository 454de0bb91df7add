"""The Python SDK of switchboard: `AgentClient`, `AppClient`, typed models
generated from the hub's schemas, and a Standard Webhooks verifier."""

from . import catalogue, errors, types
from ._method import Method
from .clients import PROTOCOL, AgentClient, AppClient, Backoff, ParamsError, PersonClient, websocket_url
from .cursor import Cursor, CursorStore, FileCursorStore, MemoryCursorStore
from .events import Event
from .http import AgentCredentials, AppCredentials, HttpClient

__all__ = [
    "PROTOCOL",
    "AgentClient",
    "AgentCredentials",
    "AppClient",
    "AppCredentials",
    "Backoff",
    "Cursor",
    "CursorStore",
    "Event",
    "FileCursorStore",
    "HttpClient",
    "MemoryCursorStore",
    "Method",
    "ParamsError",
    "PersonClient",
    "catalogue",
    "errors",
    "types",
    "websocket_url",
]
