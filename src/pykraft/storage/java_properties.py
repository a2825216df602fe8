"""Java ``.properties`` text, as ``java.util.Properties.load`` reads it and ``store`` writes it.

Kafka reads and writes ``meta.properties`` with ``java.util.Properties``, so a cluster id is an arbitrary
string (kafka-facts.md §5.1: ``my@cluster@id`` is legal) and may hold ``=``, ``:``, ``#`` or ``!``, which
``store`` escapes. pykraft reads Kafka's files and Kafka reads pykraft's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = ["PropertiesSyntaxError", "load_properties", "store_properties"]

_WHITESPACE = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


class PropertiesSyntaxError(ValueError):
    """Malformed text (only a bad ``\\uXXXX`` escape is malformed to Java)."""


def _logical_lines(text: str) -> Iterable[str]:
    """Natural lines joined where a line ends in an odd number of backslashes (LineReader)."""
    pending: str | None = None
    for natural in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        line = natural.lstrip(_WHITESPACE) if pending is not None else natural
        if pending is None:
            stripped = line.lstrip(_WHITESPACE)
            if not stripped or stripped[0] in "#!":
                continue
            line = stripped
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending = (pending or "") + line[:-1]
            continue
        yield (pending or "") + line
        pending = None
    if pending is not None and pending:
        yield pending


def _unescape(raw: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch != "\\" or i + 1 >= len(raw):
            out.append(ch)
            i += 1
            continue
        nxt = raw[i + 1]
        if nxt == "u":
            digits = raw[i + 2 : i + 6]
            if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise PropertiesSyntaxError(f"Malformed \\uxxxx encoding: \\u{digits}")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    # \uXXXX pairs may spell a surrogate pair (store writes non-BMP characters that way).
    return "".join(out).encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")


def _split_key_value(line: str) -> tuple[str, str]:
    """Key ends at the first unescaped '=', ':' or whitespace; then whitespace, one '='/':', whitespace."""
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=:" or ch in _WHITESPACE:
            break
        i += 1
    key = line[:i]
    rest = line[i:].lstrip(_WHITESPACE)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_WHITESPACE)
    return key, rest


def load_properties(text: str) -> dict[str, str]:
    """``Properties.load``: comments, continuations, escapes; a later duplicate key wins."""
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split_key_value(line)
        props[_unescape(key)] = _unescape(value)
    return props


def _escape(text: str, *, is_key: bool) -> str:
    """``Properties.saveConvert`` with escUnicode (``store(OutputStream)``, what Kafka calls)."""
    out: list[str] = []
    for index, ch in enumerate(text):
        code = ord(ch)
        if ch == " ":
            out.append("\\ " if is_key or index == 0 else " ")
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\f":
            out.append("\\f")
        elif ch in "=:#!":
            out.append("\\" + ch)
        elif code < 0x20 or code > 0x7E:
            units = ch.encode("utf-16-be", "surrogatepass")
            for at in range(0, len(units), 2):
                out.append(f"\\u{int.from_bytes(units[at : at + 2], 'big'):04X}")
        else:
            out.append(ch)
    return "".join(out)


def store_properties(props: Mapping[str, str], comments: Iterable[str] = ("",)) -> str:
    """``Properties.store`` text: ``#comment`` lines, then ``key=value`` lines in the mapping's order."""
    lines = [f"#{comment}" for comment in comments]
    lines.extend(f"{_escape(k, is_key=True)}={_escape(v, is_key=False)}" for k, v in props.items())
    return "\n".join(lines) + "\n"
