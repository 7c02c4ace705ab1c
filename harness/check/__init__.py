"""One check: the chapter's tests on one implementation, as a Report.

    runner         run_check: pytest in this process, the plugin, the report
    pytest_plugin  the fixtures a pack's tests get (the impl, the golden document) and each test's outcome
    golden         the golden file: digest, verify, regenerate, fresh cases
    hints          pitfall hints from the golden answers each pitfall records
    diff           ol diff: every golden case the submission gets wrong
"""
