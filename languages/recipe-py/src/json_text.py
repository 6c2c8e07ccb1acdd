"""JSON text read, written and compared as the Rust recipe's serde_json does it.

The Rust recipe parses with serde_json (features `preserve_order` and
`float_roundtrip`) and writes compact JSON text with it; the Python recipe
must give the host the same bytes. Python's `json` module nearly agrees;
this module closes the gaps:

- numbers: an integer that fits neither u64 nor i64 is read as a float,
  `-0` is the float `-0.0`, a number too large for a float is an error,
  and `NaN`/`Infinity` are not JSON;
- floats are written in the shortest form that reads back (as Python's
  `repr`), but spelled as the `ryu` crate spells them (`1e16`, `1e-7`,
  `0.00001`, never `1e+16` or `1e-07`);
- equality is serde_json's: `1` and `1.0` differ, and so do `true` and
  `1`; object members compare in any order.

Members keep the order of the text (Python dicts are ordered, as
`preserve_order` maps are); a member named twice keeps its first place and
its last value, as in both.
"""

import json
import math
import re

# serde_json reads integers into u64 (non-negative) or i64 (negative) and
# anything beyond as an f64.
_U64_MAX = (1 << 64) - 1
_I64_MIN = -(1 << 63)


def _integer(text):
    if text == "-0":
        return -0.0
    number = int(text)
    if _I64_MIN <= number <= _U64_MAX:
        return number
    return _finite(float(text))


def _finite(number):
    if math.isinf(number):
        raise ValueError("number out of range")
    return number


def _float(text):
    return _finite(float(text))


def _constant(name):
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_int=_integer, parse_float=_float, parse_constant=_constant)


def decode(text):
    """The value of JSON text `text`; raises ValueError when it is not JSON."""
    try:
        return _DECODER.decode(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def parse(text):
    """The value of JSON text `text`, or None (JSON null) when it is absent or not JSON."""
    if text is None:
        return None
    try:
        return decode(text)
    except ValueError:
        return None


def _float_text(number):
    """`number` (finite) spelled as ryu's `format_finite` spells it."""
    if number == 0.0:
        return "-0.0" if math.copysign(1.0, number) < 0 else "0.0"
    sign = "-" if number < 0 else ""
    mantissa, _, exponent = repr(abs(number)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    stripped = digits.lstrip("0")
    # The value is 0.DIGITS × 10^kk.
    kk = len(whole) - (len(digits) - len(stripped)) + (int(exponent) if exponent else 0)
    digits = stripped.rstrip("0")
    length = len(digits)
    k = kk - length
    if 0 <= k and kk <= 16:
        body = digits + "0" * k + ".0"
    elif 0 < kk <= 16:
        body = digits[:kk] + "." + digits[kk:]
    elif -5 < kk <= 0:
        body = "0." + "0" * -kk + digits
    elif length == 1:
        body = f"{digits}e{kk - 1}"
    else:
        body = f"{digits[0]}.{digits[1:]}e{kk - 1}"
    return sign + body


# A float Python writes with an exponent (`1e+16`, `1e-05`): the only
# spelling that differs from ryu's. It may also match inside a string, which
# only costs the slower, exact path.
_EXPONENT = re.compile(r"[0-9]e[+-][0-9]")

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _write(value, out):
    if isinstance(value, float):
        out.append(_float_text(value))
    elif isinstance(value, dict):
        out.append("{")
        first = True
        for key, member in value.items():
            if not first:
                out.append(",")
            first = False
            out.append(_ENCODER.encode(key))
            out.append(":")
            _write(member, out)
        out.append("}")
    elif isinstance(value, list):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _write(item, out)
        out.append("]")
    else:
        out.append(_ENCODER.encode(value))


def text(value):
    """Compact JSON text of `value`, byte for byte as serde_json's `to_string`."""
    written = _ENCODER.encode(value)
    if _EXPONENT.search(written) is None:
        return written
    out = []
    _write(value, out)
    return "".join(out)


def equal(left, right):
    """Whether two JSON values are equal as serde_json's `Value` compares them."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return len(left) == len(right) and all(key in right and equal(member, right[key]) for key, member in left.items())
    if isinstance(left, list):
        return len(left) == len(right) and all(equal(a, b) for a, b in zip(left, right))
    return left == right


def is_object(value):
    """Whether `value` is a JSON object."""
    return isinstance(value, dict)


def is_reference(value):
    """Whether `value` is a string that starts with `$` (a recipe reference)."""
    return isinstance(value, str) and value.startswith("$")


def push_token(pointer, token):
    """`pointer` with one RFC 6901 token appended (`~` as `~0`, `/` as `~1`)."""
    return pointer + "/" + token.replace("~", "~0").replace("/", "~1")
