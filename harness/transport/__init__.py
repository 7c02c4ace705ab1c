"""The two transports an Impl calls through, and the session both run the chapter's ops in.

    inprocess.InProcess          trusted code (the reference, mutants), called in the judge process
    worker_client.WorkerTransport  a submission, in a worker process speaking spec/protocol.md;
                                 the worker's command comes from the submission's language
    session.Session              one implementation's live state: its package, handles, callbacks

Kept free of imports here, so the worker process loads only what it needs (session, wire).
"""
