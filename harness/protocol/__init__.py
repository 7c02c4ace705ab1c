"""What crosses into the sandbox: the JSON-lines protocol of spec/protocol.md, on both of its sides.

    wire      the wire format: JSON lines, non-finite floats, bounded reads
    session   one implementation's live state (its package, handles, callbacks), running a chapter's ops
    worker    the in-interpreter worker (`-m harness.protocol.worker`)

This folder imports nothing else of harness/: it is, whole, the kit a confined in-interpreter worker is given
(harness.languages' worker kit), and what a chapter's ops.py may import.
"""
