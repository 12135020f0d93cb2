"""A listing's inputs as the arguments of its tool: the JSON Schema a model reads, and the check
a call's arguments pass before anything is signed.

Every input (path, query, header and, for a POST listing, each body field) is one top-level
argument, so a model calls ``{"text": "hello", "target": "fr"}`` as the schema asks rather
than guessing a nested body. An input may declare, beyond the spec's ``key``, ``description``
and ``required``, a ``type`` (``string`` by default, ``integer``, ``number``, ``boolean``), an
``enum`` of allowed values and a ``minimum``/``maximum`` for numbers.

    >>> doc = {"method": "POST", "inputs": {
    ...     "path": [], "query": [{"key": "units", "description": "Units", "required": False,
    ...                            "enum": ["metric", "imperial"]}],
    ...     "header": [{"key": "X-Sandbox-Mode", "description": "", "required": False}],
    ...     "body": [{"key": "text", "description": "Text", "required": True}]}}
    >>> spec = ListingInputs.of(doc)
    >>> [(a.name, a.kind) for a in spec.arguments]
    [('units', 'query'), ('text', 'body')]
    >>> schema = spec.schema(sandbox=True)
    >>> schema["required"], schema["additionalProperties"], sorted(schema["properties"])
    (['text'], False, ['sandbox', 'text', 'units'])
    >>> spec.check({"text": "hi", "units": "kelvin"})
    Traceback (most recent call last):
    ...
    paysign.catalog.inputs.InvalidArgument: units: must be one of 'metric', 'imperial'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from paysign.errors import InvalidCatalog

INPUT_KINDS = ("path", "query", "header")
INPUT_TYPES = ("string", "integer", "number", "boolean")
SANDBOX_ARGUMENT = "sandbox"
#: The sandbox flag sets this header, so it is no argument of its own.
SANDBOX_HEADER = "x-sandbox-mode"
#: The whole body, for a POST listing whose ``inputs.body`` is not a list of fields.
BODY_ARGUMENT = "body"


class InvalidArgument(ValueError):
    """A tool call's argument the listing cannot take; ``argument`` names it."""

    def __init__(self, argument: str, reason: str) -> None:
        super().__init__(f"{argument}: {reason}")
        self.argument = argument
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Argument:
    name: str  # the tool argument
    kind: str  # where it goes: path, query, header or body
    key: str  # its name at the seller
    description: str
    required: bool
    type: str = "string"
    enum: tuple[Any, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None

    def schema(self) -> dict[str, Any]:
        text = self.description.strip() or self.key
        where = "a field of the JSON body" if self.kind == "body" else f"{self.kind} parameter"
        out: dict[str, Any] = {"type": self.type, "description": f"{text} ({where})"}
        if self.enum is not None:
            out["enum"] = list(self.enum)
        if self.minimum is not None:
            out["minimum"] = self.minimum
        if self.maximum is not None:
            out["maximum"] = self.maximum
        return out

    def check(self, value: Any) -> Any:
        if not _has_type(value, self.type):
            raise InvalidArgument(self.name, f"must be {_TYPE_WORDS[self.type]}")
        if self.enum is not None and value not in self.enum:
            allowed = ", ".join(repr(v) for v in self.enum)
            raise InvalidArgument(self.name, f"must be one of {allowed}")
        if self.minimum is not None and value < self.minimum:
            raise InvalidArgument(self.name, f"must be at least {self.minimum:g}")
        if self.maximum is not None and value > self.maximum:
            raise InvalidArgument(self.name, f"must be at most {self.maximum:g}")
        return value


_TYPE_WORDS = {
    "string": "a string",
    "integer": "a whole number",
    "number": "a number",
    "boolean": "true or false",
    "object": "a JSON object",
}


def _has_type(value: Any, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if kind == "number":
        return isinstance(value, (int, float))
    return isinstance(value, dict)


def check_input_item(item: dict[str, Any], where: str) -> None:
    """The optional members of one input (``key``, ``description`` and ``required`` are
    checked by the listing); ``InvalidCatalog`` names the member."""
    kind = item.get("type", "string")
    if kind not in INPUT_TYPES:
        raise InvalidCatalog(f"{where}/type", f"must be one of {', '.join(INPUT_TYPES)}")
    if "enum" in item:
        enum = item["enum"]
        if not isinstance(enum, list) or not enum or not all(_has_type(v, kind) for v in enum):
            raise InvalidCatalog(f"{where}/enum", f"must be a non-empty array of {kind} values")
    for bound in ("minimum", "maximum"):
        if bound in item:
            value = item[bound]
            if kind not in ("integer", "number") or not _has_type(value, "number"):
                raise InvalidCatalog(f"{where}/{bound}", "is for integer and number inputs only")


def _argument(name: str, kind: str, item: dict[str, Any]) -> Argument:
    enum = item.get("enum")
    minimum, maximum = item.get("minimum"), item.get("maximum")
    return Argument(
        name=name,
        kind=kind,
        key=item["key"],
        description=str(item.get("description") or ""),
        required=item.get("required") is True,
        type=str(item.get("type") or "string"),
        enum=tuple(enum) if isinstance(enum, list) else None,
        minimum=float(minimum) if isinstance(minimum, (int, float)) else None,
        maximum=float(maximum) if isinstance(maximum, (int, float)) else None,
    )


def _items(inputs: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    found = inputs.get(kind)
    if not isinstance(found, list):
        return []
    return [x for x in found if isinstance(x, dict) and isinstance(x.get("key"), str)]


@dataclass(frozen=True, slots=True)
class ListingInputs:
    arguments: tuple[Argument, ...]

    @classmethod
    def of(cls, document: dict[str, Any]) -> ListingInputs:
        """The arguments of a listing as published. An input whose key another one already
        took is exposed as ``<kind>_<key>`` (a query ``text`` and a body field ``text``)."""
        inputs = document.get("inputs")
        inputs = inputs if isinstance(inputs, dict) else {}
        post = str(document.get("method", "GET")).upper() == "POST"
        body = inputs.get("body")
        kinds = [*INPUT_KINDS, "body"] if post and isinstance(body, list) else INPUT_KINDS
        taken = {SANDBOX_ARGUMENT}
        out: list[Argument] = []
        for kind in kinds:
            for item in _items(inputs, kind):
                if kind == "header" and item["key"].lower() == SANDBOX_HEADER:
                    continue
                name = item["key"] if item["key"] not in taken else f"{kind}_{item['key']}"
                taken.add(name)
                out.append(_argument(name, kind, item))
        if post and not isinstance(body, list):
            # A body published in another shape: one JSON object, passed through.
            out.append(Argument(BODY_ARGUMENT, "body", BODY_ARGUMENT, "", False, "object"))
        return cls(tuple(out))

    @property
    def whole_body(self) -> bool:
        return any(a.kind == "body" and a.type == "object" for a in self.arguments)

    def schema(self, *, sandbox: bool) -> dict[str, Any]:
        properties = {a.name: a.schema() for a in self.arguments}
        if self.whole_body:
            properties[BODY_ARGUMENT] = {
                "type": "object",
                "description": "The JSON request body sent to the seller.",
            }
        if sandbox:
            properties[SANDBOX_ARGUMENT] = {
                "type": "boolean",
                "default": False,
                "description": "true: pay with test USDC on Base Sepolia (the seller's sandbox).",
            }
        schema: dict[str, Any] = {
            "type": "object",
            "properties": properties,
            "additionalProperties": False,
        }
        required = [a.name for a in self.arguments if a.required]
        if required:
            schema["required"] = required
        return schema

    def check(self, given: dict[str, Any]) -> dict[str, Any]:
        """The arguments of a call, each checked against its input: the first problem found
        is raised, naming the argument. ``sandbox`` is the caller's to judge."""
        known = {a.name: a for a in self.arguments}
        for name in given:
            if name not in known and name != SANDBOX_ARGUMENT:
                accepted = ", ".join([*known, SANDBOX_ARGUMENT])
                raise InvalidArgument(
                    name, f"is not an argument of this tool (it takes {accepted})"
                )
        out: dict[str, Any] = {}
        for argument in self.arguments:
            value = given.get(argument.name)
            if value is None:
                if argument.required:
                    raise InvalidArgument(argument.name, "is required")
                continue
            out[argument.name] = argument.check(value)
        return out
