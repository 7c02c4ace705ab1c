"""The judge's side of a call: an Impl, and the two transports it calls through.

    impl.Impl                      the adapter the tests call: a chapter's client subclasses it
    shapes                         the shape of a worker's answer, checked before any test reads it
    feedback                       a call and its input written for a student; "expected X, got Y"
    inprocess.InProcess            trusted code (the reference, mutants), in the judge's process
    worker_client.WorkerTransport  a submission, in a confined worker speaking spec/protocol.md
"""
