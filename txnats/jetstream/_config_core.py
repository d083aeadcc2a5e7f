"""The conversion core of the typed JetStream configurations and infos.

Every typed record (:class:`~txnats.jetstream.config.StreamConfig`, the infos, the
stores' configurations) is a dataclass deriving from :class:`JsonObject`. What a field
needs to go to and from the server's JSON is read once per class from the field's type
and metadata, not written per class:

- a field typed :data:`Seconds` (or ``list[Seconds]``) holds **seconds** (a ``float``; a
  ``timedelta`` is accepted as input) and is nanoseconds on the wire;
- a ``datetime`` field is an RFC 3339 time on the wire (UTC, to the microsecond: the
  server writes nanoseconds, Python keeps microseconds);
- a field typed with an :class:`enum.Enum` holds the member (a value a newer server sends
  that this version does not know stays the plain string);
- a field typed with another :class:`JsonObject` (or a list or ``dict[str, ...]`` of
  them) is converted recursively;
- ``Annotated[..., JsonName("ts")]`` names the server's field when ours differs;
- a field whose value is ``None`` is left out of the JSON (the server's default applies);
- fields this version does not know land in :attr:`JsonObject.extra` and are written
  back untouched by :meth:`JsonObject.to_json`, so a newer server's fields round-trip.

Two ways in, one unit each: :meth:`JsonObject.from_json` reads the server's JSON
(nanoseconds, trusted, never refused); the constructor and :meth:`JsonObject.coerce`
take what users write (seconds, ``timedelta``, enum values as strings, nested records as
dicts) and refuse what is wrong with :class:`~txnats.errors.InvalidArgumentError`.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import types
import typing
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Annotated, Any, ClassVar, TypeVar

from twisted.logger import Logger

from txnats._args import MAX_SECONDS, check_count, check_delay
from txnats.errors import InvalidArgumentError, InvalidArgumentTypeError, JetStreamError

__all__ = ["JsonName", "JsonObject", "Seconds", "from_ns", "seconds", "to_ns"]

T = TypeVar("T", bound="JsonObject")

_NS = 1_000_000_000

log = Logger()


class _Nanoseconds:
    """The marker of a duration field: seconds here, nanoseconds on the wire."""

    def __repr__(self) -> str:
        return "NANOSECONDS"


NANOSECONDS = _Nanoseconds()

#: The type of a duration field: seconds (a ``float``; ``timedelta`` accepted as
#: input), nanoseconds in the server's JSON.
Seconds = Annotated[float, NANOSECONDS]


@dataclasses.dataclass(frozen=True, slots=True)
class JsonName:
    """``Annotated[T, JsonName("ts")]``: the field is ``ts`` in the server's JSON."""

    name: str


def to_ns(seconds: float) -> int:
    """Seconds as whole nanoseconds, the nearest to the decimal number ``seconds``
    prints as: exact back and forth with :func:`from_ns` for any number of nanoseconds
    below 2**52 (52 days) and any number of microseconds below 2**52 (142 years)."""
    return round(Decimal(repr(float(seconds))) * _NS)


def from_ns(ns: int | float) -> float:
    """Nanoseconds as seconds."""
    return ns / _NS


def _time_to_json(t: datetime) -> str:
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    return t.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def _time_from_json(v: Any) -> Any:
    if not isinstance(v, str):
        return WRONG
    try:
        return datetime.fromisoformat(v)
    except ValueError:
        return v  # kept as the server wrote it


# ---------------------------------------------------------------------- field plans
@dataclasses.dataclass(frozen=True, slots=True)
class _Plan:
    """How one field converts: ``out`` to JSON, ``inn`` from JSON, ``user`` from input."""

    name: str
    json_name: str
    out: Callable[[Any], Any]
    inn: Callable[[Any], Any]
    user: Callable[[str, Any], Any]


def _same(v: Any) -> Any:
    return v


def _user_same(name: str, v: Any) -> Any:
    return v


def _user_seconds(name: str, v: Any) -> float:
    if isinstance(v, timedelta):
        v = v.total_seconds()
    try:
        return check_delay(name, v)
    except InvalidArgumentError as e:
        if type(e) is InvalidArgumentError and isinstance(v, (int, float)) and v > MAX_SECONDS:
            raise InvalidArgumentError(
                f"{e}: durations are seconds here, not nanoseconds"
            ) from None
        raise


def _user_int(name: str, v: Any) -> int:
    """A whole number the server reads as an int64: -1 (its "unlimited") or more."""
    return check_count(name, v, minimum=-1)


def _user_time(name: str, v: Any) -> datetime:
    if isinstance(v, datetime):
        return v if v.tzinfo is not None else v.replace(tzinfo=UTC)
    if isinstance(v, str):
        try:
            return _user_time(name, datetime.fromisoformat(v))
        except ValueError:
            pass
    raise InvalidArgumentTypeError(f"{name} must be a datetime, not {v!r}")


def _strip_optional(hint: Any) -> Any:
    """``X | None`` -> ``X``; anything else unchanged."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return hint


def _is_record(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, JsonObject)


def _is_enum(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, enum.Enum)


def _enum_in(cls: type[enum.Enum]) -> Callable[[Any], Any]:
    def inn(v: Any) -> Any:
        if not isinstance(v, str):
            return WRONG
        try:
            return cls(v)
        except ValueError:
            return v  # a value a newer server knows: kept as its string

    return inn


def _enum_user(cls: type[enum.Enum]) -> Callable[[str, Any], Any]:
    def user(name: str, v: Any) -> Any:
        try:
            return cls(v)
        except ValueError:
            allowed = ", ".join(repr(m.value) for m in cls)
            raise InvalidArgumentError(f"{name} must be one of {allowed}, not {v!r}") from None

    return user


def _enum_out(v: Any) -> Any:
    return v.value if isinstance(v, enum.Enum) else v


def _unannotated(hint: Any) -> tuple[Any, tuple[Any, ...]]:
    """``Annotated[T, m...]`` -> (T, (m...)); anything else -> (hint, ())."""
    if typing.get_origin(hint) is Annotated:
        return typing.get_args(hint)[0], tuple(hint.__metadata__)
    return hint, ()


def _converters(
    hint: Any,
) -> tuple[Callable[[Any], Any], Callable[[Any], Any], Callable[[str, Any], Any]]:
    """(out, in, user) for a field of type ``hint``."""
    outer, marks0 = _unannotated(hint)  # Annotated[X | None, ...] or Annotated[X, ...]
    t, marks1 = _unannotated(_strip_optional(outer))  # X | None with X Annotated
    marks = marks0 + marks1
    origin = typing.get_origin(t)
    args = typing.get_args(t)
    if origin is list and args and NANOSECONDS in _unannotated(args[0])[1]:
        return (
            lambda v: [to_ns(s) for s in v],
            lambda v: [from_ns(n) for n in v] if _all_numbers(v) else WRONG,
            lambda name, v: [_user_seconds(name, s) for s in v],
        )
    if NANOSECONDS in marks:
        return (
            to_ns,
            lambda v: from_ns(v) if _is_number(v) else WRONG,
            _user_seconds,
        )
    if t is datetime:
        return _time_to_json, _time_from_json, _user_time
    if _is_enum(t):
        return _enum_out, _enum_in(t), _enum_user(t)
    if t is int:
        return _same, lambda v: v if type(v) is int else WRONG, _user_int
    if t is str or t is bool or t is float:
        kind = (int, float) if t is float else t
        return _same, lambda v: v if isinstance(v, kind) and (
            t is bool or type(v) is not bool
        ) else WRONG, _user_same
    if _is_record(t):
        return (
            lambda v: v.to_json(),
            lambda v: t.from_json(v) if isinstance(v, Mapping) else WRONG,
            lambda name, v: t.coerce(v, name),
        )
    if origin is list and args and _is_record(args[0]):
        item = args[0]
        return (
            lambda v: [x.to_json() for x in v],
            lambda v: [item.from_json(x) for x in v if isinstance(x, Mapping)]
            if isinstance(v, list) else WRONG,
            lambda name, v: [item.coerce(x, name) for x in v],
        )
    if origin is dict and len(args) == 2 and _is_record(args[1]):
        val = args[1]
        return (
            lambda v: {k: x.to_json() for k, x in v.items()},
            lambda v: {str(k): val.from_json(x) for k, x in v.items() if isinstance(x, Mapping)}
            if isinstance(v, dict) else WRONG,
            lambda name, v: {k: val.coerce(x, name) for k, x in v.items()},
        )
    if origin in (list, dict):
        return _same, lambda v: v if isinstance(v, origin) else WRONG, _user_same
    return _same, _same, _user_same


class _Wrong:
    """What a field's reader returns for a value of the wrong type (the field then
    keeps its default): a server answer is relayed bytes, and a foreign responder on
    ``$JS.API.>`` may write anything."""

    def __repr__(self) -> str:
        return "WRONG"


WRONG = _Wrong()


def _is_number(v: object) -> bool:
    return type(v) is int or type(v) is float


def _all_numbers(v: object) -> bool:
    return isinstance(v, list) and all(_is_number(x) for x in v)


def _plans(cls: type[JsonObject]) -> tuple[_Plan, ...]:
    hints = typing.get_type_hints(cls, include_extras=True)
    plans = []
    for f in dataclasses.fields(cls):
        if f.name == "extra":
            continue
        hint = hints[f.name]
        names = [m.name for m in _unannotated(hint)[1] if isinstance(m, JsonName)]
        out, inn, user = _converters(hint)
        plans.append(_Plan(f.name, names[0] if names else f.name, out, inn, user))
    return tuple(plans)


# ---------------------------------------------------------------------- the base
@dataclasses.dataclass
class JsonObject:
    """The base of every typed JetStream record; see the module's docstring."""

    #: The server's fields this version does not know, as the server sent them
    #: (written back untouched by :meth:`to_json`; may also be set to send a field
    #: this version does not know).
    extra: dict[str, Any] = dataclasses.field(default_factory=dict, kw_only=True, repr=False)

    _plans_cache: ClassVar[dict[type, tuple[_Plan, ...]]] = {}

    @classmethod
    def _field_plans(cls) -> tuple[_Plan, ...]:
        plans = JsonObject._plans_cache.get(cls)
        if plans is None:
            plans = JsonObject._plans_cache[cls] = _plans(cls)
        return plans

    def __post_init__(self) -> None:
        """Check and convert what a user gave: seconds and ``timedelta`` to float
        seconds, strings to enum members, dicts to nested records."""
        kind = type(self).__name__
        for p in self._field_plans():
            v = getattr(self, p.name)
            if v is not None:
                setattr(self, p.name, p.user(f"{kind}.{p.name}", v))
        if not isinstance(self.extra, dict):
            raise InvalidArgumentTypeError(f"{kind}.extra must be a dict, not {self.extra!r}")

    # ------------------------------------------------------------------ server JSON
    @classmethod
    def from_json(cls: type[T], data: Mapping[str, Any]) -> T:
        """The record for the server's JSON object ``data`` (durations in nanoseconds).

        Never refuses a JSON object that has the fields the record requires (else
        :class:`JetStreamError`, as for anything but an object): fields it does not know
        go to :attr:`extra`, enum values it
        does not know stay strings, a field the server left out keeps its default, and
        so does one of the wrong type (a string where a number goes; logged), so
        that code reading the record never meets a type its annotation does not say.
        """
        if not isinstance(data, Mapping):
            raise JetStreamError(f"{cls.__name__}: not a JSON object: {str(data)[:64]!r}")
        obj = cls.__new__(cls)
        rest = dict(data)
        for f in dataclasses.fields(cls):
            if f.default is not dataclasses.MISSING:
                setattr(obj, f.name, f.default)
            elif f.default_factory is not dataclasses.MISSING:
                setattr(obj, f.name, f.default_factory())
            else:
                setattr(obj, f.name, None)
        for p in cls._field_plans():
            if p.json_name in rest:
                v = rest.pop(p.json_name)
                if v is None:
                    setattr(obj, p.name, None)
                    continue
                got = p.inn(v)
                if got is WRONG:
                    log.warn("{record}.{field}: ignoring a value of the wrong type, {value}",
                             record=cls.__name__, field=p.name, value=repr(v)[:80])
                else:
                    setattr(obj, p.name, got)
        obj.extra = rest
        for f in dataclasses.fields(cls):
            if (
                f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
                and f.name != "extra" and getattr(obj, f.name) is None
            ):
                raise JetStreamError(
                    f"{cls.__name__} without its {f.name}: {str(dict(data))[:80]!r}"
                )
        return obj

    def to_json(self) -> dict[str, Any]:
        """The server's JSON object for this record (durations in nanoseconds), with
        :attr:`extra` written back; fields that are ``None`` are left out."""
        out: dict[str, Any] = {}
        for p in self._field_plans():
            v = getattr(self, p.name)
            if v is not None:
                out[p.json_name] = p.out(v)
        for k, v in self.extra.items():
            out.setdefault(k, v)
        return out

    # ------------------------------------------------------------------ user input
    @classmethod
    def coerce(cls: type[T], value: object, what: str | None = None) -> T:
        """``value`` as a record: a record of this class as it is, a mapping of field
        names (our names, durations in **seconds**) built into one.

        :raises InvalidArgumentError: for a field this class does not have (give such
            fields in ``extra``) or a bad value; :class:`InvalidArgumentTypeError` for
            anything else.
        """
        if isinstance(value, cls):
            return value
        if isinstance(value, Mapping):
            return cls.build(value, {}, what)
        raise InvalidArgumentTypeError(
            f"{what or cls.__name__} must be a {cls.__name__} or a dict, "
            f"not {type(value).__name__}"
        )

    @classmethod
    def build(
        cls: type[T], config: object, fields: Mapping[str, Any], what: str | None = None
    ) -> T:
        """A record from a record or mapping ``config`` (or ``None``) and keyword
        ``fields`` overriding it: what the API's ``(config=None, **fields)`` calls take.
        Units as for :meth:`coerce`; the record given is not changed."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(str(k) for k in fields if k not in names)
        if config is None:
            merged = dict(fields)
        elif isinstance(config, cls):
            if not unknown:
                return config.with_fields(fields) if fields else config
            merged = {}
        elif isinstance(config, Mapping):
            merged = {**config, **fields}
            unknown = sorted(str(k) for k in merged if k not in names)
        else:
            raise InvalidArgumentTypeError(
                f"{what or 'config'} must be a {cls.__name__} or a dict, "
                f"not {type(config).__name__}"
            )
        if unknown:
            raise InvalidArgumentError(
                f"{cls.__name__} has no field {', '.join(map(repr, unknown))} "
                "(a field this version does not know goes in extra={...}, as the server's JSON)"
            )
        try:
            return cls(**merged)
        except TypeError as e:  # a required field missing
            raise InvalidArgumentTypeError(f"{cls.__name__}: {e}") from None

    def with_fields(self: T, fields: Mapping[str, Any]) -> T:
        """A copy with ``fields`` (known names) set and checked; the other fields are
        kept as they are, unchecked: a record read from the server may hold values this
        version does not know (an enum's new value), and they go back as they came."""
        obj = copy.deepcopy(self)
        kind = type(self).__name__
        plans = {p.name: p for p in self._field_plans()}
        for name, v in fields.items():
            if name == "extra":
                if not isinstance(v, dict):
                    raise InvalidArgumentTypeError(f"{kind}.extra must be a dict, not {v!r}")
                obj.extra = dict(v)
            else:
                setattr(obj, name, None if v is None else plans[name].user(f"{kind}.{name}", v))
        return obj

def seconds(name: str, value: object) -> float:
    """``value`` (a number of seconds or a ``timedelta``) as seconds, finite and not
    negative; :class:`InvalidArgumentError` naming ``name`` otherwise."""
    return _user_seconds(name, value)
