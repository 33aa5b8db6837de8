"""Python values onto proto fields, the way the CLI's flags set them (common/field_text.h,
common/enum_names.h): enums by short name ("bf16"), sizes with suffixes ("4Ki", "64M"),
durations ("500ms", a number of seconds or a timedelta), "START:END" or a pair for small
messages, dicts for maps, lists for repeated fields. Driven by the descriptors, so a field added
to a spec needs no change here."""

from __future__ import annotations

import datetime
import re
from typing import Any, List, Sequence

from google.protobuf.descriptor import EnumDescriptor, EnumValueDescriptor, FieldDescriptor
from google.protobuf.message import Message

_INTEGER_TYPES = {
    FieldDescriptor.TYPE_INT32,
    FieldDescriptor.TYPE_INT64,
    FieldDescriptor.TYPE_UINT32,
    FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_SINT32,
    FieldDescriptor.TYPE_SINT64,
    FieldDescriptor.TYPE_FIXED32,
    FieldDescriptor.TYPE_FIXED64,
    FieldDescriptor.TYPE_SFIXED32,
    FieldDescriptor.TYPE_SFIXED64,
}
_FLOAT_TYPES = {FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT}


def _canonical(text: str) -> str:
    return text.strip().replace("_", "-").lower()


def enum_common_prefix(enum_type: EnumDescriptor) -> str:
    """The prefix every value shares, cut after an '_' ("DATA_TYPE_"), as EnumCommonPrefix."""
    names = [value.name for value in enum_type.values]
    if len(names) == 1:
        return ""
    prefix = names[0]
    for name in names[1:]:
        length = 0
        while length < min(len(prefix), len(name)) and prefix[length] == name[length]:
            length += 1
        prefix = prefix[:length]
    cut = prefix.rfind("_")
    return "" if cut < 0 else prefix[: cut + 1]


def enum_short_name(enum_type: EnumDescriptor, number: int) -> str:
    """DATA_TYPE_FP8_E4M3 -> "fp8-e4m3", TIMED_OUT -> "timed-out"; the number if unnamed."""
    value = enum_type.values_by_number.get(number)
    if value is None:
        return str(number)
    return _canonical(value.name[len(enum_common_prefix(enum_type)) :])


def enum_choices(enum_type: EnumDescriptor) -> List[str]:
    return [enum_short_name(enum_type, v.number) for v in enum_type.values if v.number != 0]


def parse_enum(enum_type: EnumDescriptor, value: Any) -> EnumValueDescriptor:
    if isinstance(value, int) and not isinstance(value, bool):
        found = enum_type.values_by_number.get(value)
        if found is None or value == 0:
            raise ValueError(f"{value} is not one of {', '.join(enum_choices(enum_type))}")
        return found
    if not isinstance(value, str):
        raise ValueError(f"{value!r}: give one of {', '.join(enum_choices(enum_type))}")
    typed = _canonical(value)
    for candidate in enum_type.values:
        if candidate.number == 0:
            continue
        if typed in (enum_short_name(enum_type, candidate.number), _canonical(candidate.name)):
            return candidate
    raise ValueError(f'"{value}" is not one of {", ".join(enum_choices(enum_type))}')


_SIZE = re.compile(r"^([+-]?)(0x[0-9a-fA-F]+|\d+(?:\.\d+)?)\s*([kKmMgGtT]i?)?([bB])?$")
_POWERS = {"k": 1, "m": 2, "g": 3, "t": 4}


def parse_sized_integer(text: str, byte_sized: bool) -> int:
    """"4Ki" = 4096; "64M" = 64 MiB on byte-sized fields, 64 000 000 on counts; "0x" hex."""
    match = _SIZE.match(text.strip())
    if match is None or (match.group(4) and not byte_sized):
        raise ValueError(f'"{text}" is not an integer (4096, 4Ki, 1.5M, 0x10)')
    sign, number, suffix = match.group(1), match.group(2), match.group(3)
    if number.lower().startswith("0x"):
        if suffix:
            raise ValueError(f'"{text}": no size suffix on a hex number')
        magnitude = int(number, 16)
    else:
        scale = 1
        if suffix:
            base = 1024 if (suffix.endswith("i") or byte_sized) else 1000
            scale = base ** _POWERS[suffix[0].lower()]
        whole = float(number) * scale
        if whole != int(whole):
            raise ValueError(f'"{text}" is not a whole number')
        magnitude = int(number) * scale if "." not in number else int(whole)
    return -magnitude if sign == "-" else magnitude


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_DURATION_UNITS = {
    "ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0,
}


def parse_duration_seconds(value: Any) -> float:
    """A timedelta, a number of seconds, or text as the CLI takes it: "500ms", "1m30s"."""
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if text == "0":
            return 0.0
        parts = _DURATION_PART.findall(text)
        if parts and "".join(n + u for n, u in parts) == text:
            return sum(float(n) * _DURATION_UNITS[u] for n, u in parts)
    raise ValueError(f"{value!r} is not a duration (seconds, a timedelta, or text like 500ms)")


def _parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "1", "yes", "on"):
        return True
    if isinstance(value, str) and value.strip().lower() in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"{value!r} is not a boolean (True or False)")


def _scalar(field: FieldDescriptor, value: Any) -> Any:
    if field.type in _INTEGER_TYPES:
        if isinstance(value, bool):
            raise ValueError(f"{value!r} is not an integer")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            return parse_sized_integer(value, "bytes" in field.name)
        raise ValueError(f"{value!r} is not an integer")
    if field.type in _FLOAT_TYPES:
        if isinstance(value, bool):
            raise ValueError(f"{value!r} is not a number")
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise ValueError(f"{value!r} is not a number")
    if field.type == FieldDescriptor.TYPE_BOOL:
        return _parse_bool(value)
    if field.type == FieldDescriptor.TYPE_ENUM:
        return parse_enum(field.enum_type, value).number
    if field.type == FieldDescriptor.TYPE_STRING:
        if not isinstance(value, str):
            raise ValueError(f"{value!r} is not text")
        return value
    raise ValueError(f"a {field.type} field cannot be set from {value!r}")


def _set_message(message: Message, value: Any) -> None:
    """A Duration from seconds/text/timedelta; a two-field message ("START:END") from a pair,
    text or a dict; any message from a dict of its fields or a message of its type."""
    if isinstance(value, Message):
        message.CopyFrom(value)
        return
    if message.DESCRIPTOR.full_name == "google.protobuf.Duration":
        seconds = parse_duration_seconds(value)
        whole = int(seconds)
        message.seconds = whole
        message.nanos = int(round((seconds - whole) * 1e9))
        return
    fields = message.DESCRIPTOR.fields
    if isinstance(value, str) and ":" in value and len(fields) == 2:
        value = tuple(value.split(":", 1))
    if isinstance(value, (tuple, list)) and len(value) == len(fields):
        value = {field.name: item for field, item in zip(fields, value)}
    if not isinstance(value, dict):
        raise ValueError(
            f"{value!r}: give a dict of {', '.join(f.name for f in fields)}"
            + (" or a (start, end) pair" if len(fields) == 2 else "")
        )
    for name, item in value.items():
        field = message.DESCRIPTOR.fields_by_name.get(name)
        if field is None:
            raise ValueError(
                f"{message.DESCRIPTOR.name} has no field {name!r} "
                f"(fields: {', '.join(f.name for f in fields)})"
            )
        set_field(message, field, item)


def set_field(message: Message, field: FieldDescriptor, value: Any) -> None:
    """Sets (replaces) `field` of `message` from a Python value; ValueError saying what is
    allowed, without the field's name (the caller knows how the user spelled it)."""
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        if not isinstance(value, dict):
            raise ValueError(f"{value!r} is not a dict")
        target = getattr(message, field.name)
        target.clear()
        value_field = field.message_type.fields_by_name["value"]
        key_field = field.message_type.fields_by_name["key"]
        for key, item in value.items():
            if value_field.message_type is not None:
                _set_message(target[_scalar(key_field, key)], item)
            else:
                target[_scalar(key_field, key)] = _scalar(value_field, item)
        return
    if field.label == FieldDescriptor.LABEL_REPEATED:
        items: Sequence[Any]
        if isinstance(value, (list, tuple, range)):
            items = list(value)
        elif isinstance(value, str) and field.type != FieldDescriptor.TYPE_STRING:
            items = [part for part in value.split(",") if part.strip()]
        else:
            items = [value]
        target = getattr(message, field.name)
        del target[:]
        for item in items:
            if field.message_type is not None:
                _set_message(target.add(), item)
            else:
                target.append(_scalar(field, item))
        return
    if field.message_type is not None:
        sub = getattr(message, field.name)
        sub.Clear()
        _set_message(sub, value)
        sub.SetInParent()
        return
    setattr(message, field.name, _scalar(field, value))


def value_syntax(field: FieldDescriptor) -> str:
    """How a value is given, for error messages: "int", "fp32|fp16|...", "duration"."""
    if field.message_type is not None:
        if field.message_type.GetOptions().map_entry:
            return "dict"
        if field.message_type.full_name == "google.protobuf.Duration":
            return "duration"
        return "dict" if len(field.message_type.fields) != 2 else "(start, end)"
    if field.type == FieldDescriptor.TYPE_ENUM:
        syntax = "|".join(enum_choices(field.enum_type))
    elif field.type in _INTEGER_TYPES:
        syntax = "int"
    elif field.type in _FLOAT_TYPES:
        syntax = "float"
    elif field.type == FieldDescriptor.TYPE_BOOL:
        syntax = "bool"
    else:
        syntax = "str"
    return f"list of {syntax}" if field.label == FieldDescriptor.LABEL_REPEATED else syntax


def axis_text(value: Any) -> str:
    """A sweep axis value in the syntax the daemon expands (the CLI's): 4096, bf16, 500ms."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime.timedelta):
        return f"{value.total_seconds()!r}s"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return f"{value[0]}:{value[1]}"
    return str(value)

