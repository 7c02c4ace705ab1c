"""What is under test: a submission's layout, its upload, the reference, and an Impl over any of them.

    upload     the one walk over an upload's tree (no link followed, caps)
    layout     which language and layout a submission has, and what it lacks
    reference  the course's reference, loaded by path (the judge's answer key: pristine(chapter))
    open       open_impl: reference, mutant:ID or a submission, as an Impl on its transport
    version    the harness version a judge grades with: what it reads and runs on, and its digest
"""
