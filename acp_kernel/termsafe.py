"""Agent text made safe for the user's own terminal (the CLI's sink).

A terminal obeys what it is sent: an agent that repeats a hostile web page
could set the clipboard (OSC 52), the window title, clear the screen, hide
text (SGR 8), move the cursor to overwrite a permission question, or use a
carriage return or bidi override to make a command read as something else.
Every agent-derived string the CLI prints goes through :func:`clean` first.

What comes out contains no escape sequence and no control character except
``\\n`` and ``\\t`` (with ``colour=True``: plus plain SGR colour codes):

- CSI (ESC ``[`` or U+009B ... final byte), OSC/DCS/SOS/PM/APC strings (to
  BEL or ST) and single-character ESC sequences are removed whole; an
  unterminated string sequence loses only its introducer, so its payload
  stays visible as text instead of hiding the rest of the answer;
- other C0 controls and DEL are shown as their Unicode control pictures
  (``\\r`` alone becomes ``␍``: a carriage return mid-line could hide text);
  ``\\r\\n`` becomes ``\\n``;
- other C1 controls (U+0080-U+009F) and lone surrogates (undecodable bytes,
  which would reach the terminal as raw 8-bit C1 bytes) become U+FFFD;
- bidi embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069) are
  removed, so text reads in the order it is stored.

Pure and linear; plain text (the common case) is returned as is after one
regex scan.
"""

from __future__ import annotations

import re

#: Anything :func:`clean` would change (plain text fails this search).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_UNSAFE_LINE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
#: The same of a text whose every character is Latin-1, as its bytes (the character codes):
#: the bytes that are not these, deleted, leave nothing when nothing would change.
_SAFE_LATIN1 = bytes(b for b in range(256) if not _UNSAFE.match(chr(b)))
_SAFE_LATIN1_LINE = bytes(b for b in range(256) if not _UNSAFE_LINE.match(chr(b)))
#: Shorter texts are searched: the regex's start-up is less than a copy's.
_SEARCH_BELOW = 256


def _plain(text: str, oneline: bool) -> bool:
    """Whether :func:`clean` leaves ``text`` as it is. A long text that is all Latin-1 (most
    tool output: code, logs) is checked as its bytes, by one table pass (0.3 ns a byte); the
    regex tries its class at every character (2.6 ns), 0.3 ms of a 100 KB file read."""
    if len(text) >= _SEARCH_BELOW:
        try:
            codes = text.encode("latin-1")
        except UnicodeEncodeError:  # (a character past U+00FF: the regex, below)
            pass
        else:
            return not codes.translate(None, _SAFE_LATIN1_LINE if oneline else _SAFE_LATIN1)
    return not (_UNSAFE_LINE if oneline else _UNSAFE).search(text)

# Alternatives, tried in order at each position. Bodies stop at any ESC, BEL
# or C1 character and never backtrack (possessive), so the scan is linear.
_STRING = "(?:\x1b[\\]P^_X]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x80-\x9f]*+(?:\x07|\x1b\\\\|\x9c)"
_CSI = "(?P<csi>(?:\x1b\\[|\x9b)(?P<params>[\x30-\x3f]*+)(?P<inter>[\x20-\x2f]*+)(?P<final>[\x40-\x7e]?))"
_ESC = "\x1b[\x20-\x2f]*+[\x30-\x7e]?"
_OTHER = "(?P<ctl>[\x00-\x1f\x7f-\x9f])|(?P<bidi>[\u202a-\u202e\u2066-\u2069])|(?P<sur>[\ud800-\udfff])"
_SEQ = re.compile(f"(?P<seq>{_STRING})|{_CSI}|(?P<esc>{_ESC})|(?P<crlf>\r\n)|{_OTHER}")

#: SGR codes kept with ``colour=True``: reset, bold, italic, underline and
#: foreground colours. No background colours and no "conceal" (8): those can
#: hide text (foreground on the same background).
_SGR_KEEP = frozenset({0, 1, 3, 4, 22, 23, 24, 39, *range(30, 38), *range(90, 98)})

REPLACEMENT = "\ufffd"
#: How a newline looks in one-line mode (:func:`clean` with ``oneline=True``).
NEWLINE_MARK = "\u240a"  # ␊


def _picture(ch: str) -> str:
    """The Unicode control picture of a C0 control or DEL (``\\r`` -> ``␍``)."""
    code = ord(ch)
    return "\u2421" if code == 0x7F else chr(0x2400 + code)


def _sgr(params: str) -> str:
    """A plain-colour SGR sequence rebuilt from ``params``, or "" if nothing is kept."""
    codes: list[str] = []
    parts = params.split(";") if params else ["0"]
    i = 0
    while i < len(parts):
        part = parts[i] or "0"
        i += 1
        if not part.isdigit():
            return ""  # sub-parameters (':') and the like: not plain
        code = int(part)
        if code == 38 and i < len(parts):  # extended foreground: 5;n or 2;r;g;b
            mode = parts[i]
            width = 2 if mode == "5" else 4 if mode == "2" else 0
            values = parts[i : i + width]
            if width and len(values) == width and all(v.isdigit() and int(v) < 256 for v in values):
                codes.append(";".join(["38", *(str(int(v)) for v in values)]))
            i += max(width, 1)
        elif code in (48, 58) and i < len(parts):  # background / underline colour: dropped
            i += 2 if parts[i] == "5" else 4 if parts[i] == "2" else 1
        elif code in _SGR_KEEP:
            codes.append(str(code))
    return "\x1b[" + ";".join(codes) + "m" if codes else ""


def scan(text: str, *, colour: bool = False, oneline: bool = False) -> tuple[str, int]:
    """(:func:`clean` of ``text``, how many controls or sequences were removed or replaced).

    ``\\r\\n`` -> ``\\n`` and kept colours are not counted.
    """
    if _plain(text, oneline):
        return text, 0
    removed = 0

    def one(m: re.Match[str]) -> str:
        nonlocal removed
        if m.group("crlf") is not None:
            return NEWLINE_MARK if oneline else "\n"
        ctl = m.group("ctl")
        if ctl is not None:
            if ctl == "\n":
                return NEWLINE_MARK if oneline else ctl
            if ctl == "\t":
                return " " if oneline else ctl
            removed += 1
            return _picture(ctl) if ctl < "\x80" else REPLACEMENT
        if (
            colour
            and m.group("csi") is not None
            and m.group("final") == "m"
            and not m.group("inter")
            and all(c.isdigit() or c == ";" for c in m.group("params"))
        ):
            kept = _sgr(m.group("params"))
            if kept:
                return kept
        removed += 1
        return REPLACEMENT if m.group("sur") is not None else ""

    return _SEQ.sub(one, text), removed


def clean(text: str, *, colour: bool = False, oneline: bool = False) -> str:
    """``text`` with every terminal control and escape sequence neutralised.

    ``colour``: keep plain SGR colours (only when writing to a TTY).
    ``oneline``: also mark newlines (``␊``) and turn tabs into spaces, for
    fields that must stay on their line (titles, option names, paths): a
    newline in a tool title could otherwise fake a line of the question.
    """
    if _plain(text, oneline):
        return text  # the common case, without scan's call
    return scan(text, colour=colour, oneline=oneline)[0]


def lines_clean(text: str) -> bool:
    """Whether :func:`clean` with ``oneline`` leaves each line of ``text`` as it is (one scan
    for a block of lines, not one per line)."""
    return "\t" not in text and _plain(text, False)


def line(value: object) -> str:
    """Any value as one clean line (``None`` -> ""). A printable string (``str.isprintable``:
    no control, format, separator but the space, or surrogate character, so nothing this
    module changes) is returned without the scan, twice as fast (tool call titles)."""
    if type(value) is str and value.isprintable():
        return value
    return "" if value is None else clean(value if isinstance(value, str) else str(value), oneline=True)


_JSON_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def json_safe(encoded: str) -> str:
    """JSON text (``ensure_ascii=False``) with C1, DEL, bidi controls, lone surrogates
    and the two Unicode line breaks written as ``\\uXXXX`` escapes: the same data, safe
    bytes, and a JSON line that a reader splitting on Unicode line breaks
    (``str.splitlines``) still reads as one line.

    JSON escapes C0 itself; outside strings a JSON document is ASCII, so
    every match is inside a string, where the escape is equivalent.
    """
    if encoded.isascii():  # (known without a scan) of the set, ASCII holds DEL only
        if "\x7f" not in encoded:
            return encoded
    elif not _JSON_UNSAFE.search(encoded):
        return encoded
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", encoded)


#: :data:`_JSON_UNSAFE` as UTF-8 (surrogates passed): DEL, then a pattern each that starts with
#: a literal byte (C1, the line and paragraph separators and bidi embeddings, the bidi
#: isolates, surrogates), which the regex engine finds by a fast scan. A lead byte is never a
#: continuation byte, so a match is a whole character.
_UTF8_UNSAFE = tuple(re.compile(p) for p in (rb"\xc2[\x80-\x9f]", rb"\xe2\x80[\xa8-\xae]", rb"\xe2\x81[\xa6-\xa9]",
                                             rb"\xed[\xa0-\xbf]"))


def json_safe_utf8(data: bytes | bytearray) -> bytes:
    """:func:`json_safe` of JSON text as UTF-8 (surrogates passed), as UTF-8: what it escapes
    is looked for in the bytes, three times faster than in the text (a 100 KB file read in a
    JSON line with one accented letter was scanned at 2 ns a character), and text is made
    of them only when something is to be escaped."""
    if b"\x7f" in data or (not data.isascii() and any(p.search(data) for p in _UTF8_UNSAFE)):
        return json_safe(data.decode(errors="surrogatepass")).encode()
    return bytes(data)
