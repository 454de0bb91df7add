"""What the SDK knows about one method, callback or event."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, RootModel

P = TypeVar("P", bound=BaseModel)
R = TypeVar("R", bound=BaseModel)


@dataclass(frozen=True)
class Method(Generic[P, R]):
    """A catalogue entry: the wire name and the generated models.

    `kind` is `method` (peer to hub), `callback` (the hub calls the app) or
    `event` (a notification whose params are the event envelope).
    """

    name: str
    kind: Literal["method", "callback", "event"]
    caller: str | None
    params: type[P] | None
    result: type[R] | None

    def encode_params(self, params: Any) -> dict[str, Any]:
        """A model or a dict, checked against the params model, as JSON."""
        if self.params is None:
            return {} if params is None else dict(params)
        model = params if isinstance(params, self.params) else self.params.model_validate(params or {})
        return model.model_dump(mode="json", by_alias=True, exclude_none=True)

    def decode_result(self, value: Any) -> Any:
        """The answer as the result model (a root model's inner value)."""
        if self.result is None:
            return value
        return unwrap(self.result.model_validate(value))

    def decode_params(self, value: Any) -> Any:
        if self.params is None:
            return value
        return unwrap(self.params.model_validate(value))


def unwrap(model: Any) -> Any:
    """Root models (a schema that is a `$ref`) stand for their inner model."""
    return model.root if isinstance(model, RootModel) else model
