"""Text a submission wrote (its name, its exception messages, its file names), made safe for each output
while still showing what it wrote. Stdlib only: the Gradescope renderer runs where ol's packages may not be.

- `visible`: for people (the console, Gradescope's text): every character repr() escapes, bar
  the newline, is shown as repr writes it (ESC as the four characters \\x1b, a bidi override as \\u202e),
  so no message can move the cursor, clear the screen, recolour a line or reorder the text around it.
- `xml_text`: for XML (JUnit): the characters XML 1.0 forbids (C0 controls but tab, newline and carriage
  return; lone surrogates; U+FFFE, U+FFFF), the DEL and C1 controls it discourages, and the carriage
  return (a parser reads it back as a newline), shown the same way: the file always parses, and reads
  back with every other character as written.
- `csv_cell`: for spreadsheets (grades.csv): a text cell that a spreadsheet would read as a formula gets
  a leading single quote (OWASP's CSV injection guidance), and so does one that begins with a quote, so
  that dropping one leading quote always gives the text back; numbers stay numbers.
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


_SURROGATE = re.compile("[\ud800-\udfff]")


def encodable(value):
    """A text as UTF-8 can hold it: each lone surrogate (a name's byte that is not UTF-8, as os.fsdecode
    gives it) spelled as repr spells it (\\udce9); anything else, and a value that is no text, unchanged."""
    return _SURROGATE.sub(lambda m: _escaped(m.group()), value) if isinstance(value, str) else value


# OWASP (CSV Injection): a cell starting with = + - @, a tab or a carriage return is a formula to Excel,
# LibreOffice and Google Sheets; ASVS 1.2.10 adds NUL
FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\0")


def csv_cell(value):
    """A CSV cell: a text cell that begins as a formula does gets a leading `'`, which spreadsheets read
    as "this is text" (the rest of the cell as written); so does one that begins with `'` (a spreadsheet
    shows it with its quote; a script drops one leading `'` from every text cell). Numbers and empty
    cells are unchanged."""
    if isinstance(value, str) and value.startswith((*FORMULA_START, "'")):
        return "'" + value
    return value
