"""A Report as JUnit XML: one <testcase> per chapter test; a wrong answer is a <failure>, anything else
that did not pass (error, timeout, crashed) an <error> whose type is the outcome."""

import xml.etree.ElementTree as ET

from ..outcomes import Outcome
from ..report import Report

ELEMENT = {Outcome.FAIL: "failure", Outcome.ERROR: "error", Outcome.TIMEOUT: "error", Outcome.CRASHED: "error"}


def junit_xml(rep: Report) -> str:
    failures = sum(t.outcome is Outcome.FAIL for t in rep.tests)
    root = ET.Element("testsuites")
    suite = ET.SubElement(root, "testsuite", name=f"{rep.chapter} on {rep.submission}", tests=str(len(rep.tests)),
                       failures=str(failures), errors=str(len(rep.tests) - rep.passed - failures),
                       time=f"{rep.duration_s:.3f}")
    props = ET.SubElement(suite, "properties")  # how the code ran (harness.confine), as every report says
    ET.SubElement(props, "property", name="sandbox", value=rep.sandbox or "unknown")
    for t in rep.tests:
        case = ET.SubElement(suite, "testcase", classname=rep.chapter, name=t.name, time=f"{t.duration_s:.4f}")
        if not t.outcome.passed:
            bad = ET.SubElement(case, ELEMENT[t.outcome], type=t.outcome.value, message=t.message.split("\n", 1)[0][:500])
            bad.text = t.message
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
