"""Text a submission wrote (its name, its exception messages, its file names), made safe for each output
while still showing what it wrote. Stdlib only: the Gradescope renderer runs where ol's packages may not be.

- `visible`: for people (the console, Gradescope's text): every character repr() escapes, bar the newline, as repr
  writes it (ESC as the four characters \\x1b, a bidi override as \\u202e): no message can move the cursor, clear
  the screen, recolour a line or reorder the text around it.
- `xml_text`: for XML (JUnit): the characters XML 1.0 forbids or discourages, and the carriage return (read back
  as a newline), shown the same way: the file always parses and reads back with every other character as written.
- `csv_cell`: for spreadsheets (grades.csv), in every locale: spelled as `visible` spells it, then a `'` before
  every place a field could begin as a formula (OWASP's CSV injection guidance: the cell's start and after any
  separator-like character, `;` being Excel's in much of Europe) or with a quote, so `csv_text` always gives the
  text back; numbers stay numbers.
"""

import re


def _escaped(ch: str) -> str:
    return repr(ch)[1:-1]  # '\x1b', '\u202e', '\ud800', '\t': Python's own spelling


def visible(text: str) -> str:
    """`text` with every character that str.isprintable() refuses (controls C0, DEL and C1; format
    characters such as bidi overrides; lone surrogates; line and paragraph separators; unassigned and
    private-use code points; spaces other than U+0020), except the newline, spelled as repr spells it."""
    if all(line.isprintable() for line in text.split("\n")):
        return text
    return "".join(c if c == "\n" or c.isprintable() else _escaped(c) for c in text)


# XML 1.0 Char: #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF]; less DEL and the C1
# controls (#x7F-#x9F), which the recommendation discourages, and #xD, which end-of-line handling turns into #xA
_NOT_XML = re.compile("[^\t\n\x20-\x7e\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text: str) -> str:
    """`text` as XML 1.0 may hold it and give back: each character it forbids, discourages or rewrites (CR)
    spelled as repr spells it."""
    return _NOT_XML.sub(lambda m: _escaped(m.group()), text)


# OWASP (CSV Injection): a cell starting with = + - @, a tab or a carriage return is a formula to Excel,
# LibreOffice and Google Sheets; ASVS 1.2.10 adds NUL; the full-width forms are read as them by Excel in East Asian
# locales
FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\0", "\uff1d", "\uff0b", "\uff0d", "\uff20")
# what a spreadsheet may split a line at: the comma, the semicolon (Excel's list separator in most continental
# European locales), the tab, the bar, a line's end, and the full-width and Arabic comma and semicolon
SEPARATORS = ",;|\t\r\n\uff0c\uff1b\u060c\u061b"
# a field's start (the cell's, or one after a separator, past any spaces and double quotes a reader may drop),
# followed by a formula's start or by ' (so that one ' dropped there always gives the text back)
_FIELD_START = re.compile(f"(^|[{re.escape(SEPARATORS)}])([ \"]*)(?=[{re.escape(''.join(FORMULA_START))}'])")
_PREFIXED = re.compile(f"(^|[{re.escape(SEPARATORS)}])([ \"]*)'")


def csv_cell(value):
    """A CSV cell (grades.csv): `text` spelled out as `visible` spells it, then a `'` (spreadsheets read it as "this
    is text") before every place a field could begin (the cell's start, and after each of SEPARATORS, past spaces
    and double quotes) that begins as a formula or with `'`. Numbers and empty cells are unchanged; `csv_text`
    gives the (spelled-out) text back."""
    if not isinstance(value, str) or not value:
        return value
    return _FIELD_START.sub(lambda m: m.group(1) + m.group(2) + "'", visible(value))


def csv_text(cell: str) -> str:
    """The text of a cell csv_cell wrote: one `'` dropped from each place it put one (a script reading grades.csv)."""
    return _PREFIXED.sub(lambda m: m.group(1) + m.group(2), cell)
