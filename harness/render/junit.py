"""A Report as JUnit XML: one <testcase> per chapter test; a wrong answer is a <failure>, anything else that did not
pass an <error> whose type is the outcome. A submission's own text is spelled by harness.render.literal.xml_text
(NUL as \\x00): the file always parses."""

import xml.etree.ElementTree as ET

from ..kernel.outcomes import Outcome
from ..kernel.report import Report
from .literal import xml_text

ELEMENT = {Outcome.FAIL: "failure", Outcome.ERROR: "error", Outcome.TIMEOUT: "error", Outcome.CRASHED: "error"}


def junit_xml(rep: Report) -> str:
    failures = sum(t.outcome is Outcome.FAIL for t in rep.tests)
    root = ET.Element("testsuites")
    suite = ET.SubElement(root, "testsuite", name=xml_text(f"{rep.chapter} on {rep.submission}"), tests=str(len(rep.tests)),
                       failures=str(failures), errors=str(len(rep.tests) - rep.passed - failures),
                       time=f"{rep.duration_s:.3f}")
    props = ET.SubElement(suite, "properties")  # how the code ran (harness.sandbox.confine), as every report says
    ET.SubElement(props, "property", name="sandbox", value=rep.sandbox or "unknown")
    for t in rep.tests:
        case = ET.SubElement(suite, "testcase", classname=rep.chapter, name=t.name, time=f"{t.duration_s:.4f}")
        if not t.outcome.passed:
            message = xml_text(t.message)
            bad = ET.SubElement(case, ELEMENT[t.outcome], type=t.outcome.value, message=message.split("\n", 1)[0][:500])
            bad.text = message
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
