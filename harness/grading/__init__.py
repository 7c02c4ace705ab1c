"""A class: ol grade, on this machine or on a Dask cluster; every upload its own verdict.

    grade     the orchestrator: submissions in a folder, parcels, tasks, the ledger; the events a run tells
    judge     one submission's judge process and how its exit becomes a report
    zygote    a forking server of judges, preloaded
    task      one submission graded wherever it runs (local or a Dask worker)
    parcel    a submission as bytes that travel
    ledger    what is graded, kept across runs
    cluster   Dask: the client side (the tests' loopback cluster is tests/harness/loopback_kit.py)
    roster    who the class is: submission folders mapped to student ids and emails
    class_report   what staff read after a deadline: the class's figures and each submission's feedback page
"""
