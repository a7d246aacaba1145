"""Validation reports as text for people, JSON for scripts, JUnit XML and SARIF 2.1.0 for CI
dashboards and code scanning, and GitHub workflow commands for pull-request annotations."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from .. import __version__
from ..errors import printable
from .validate import Finding, Rule, ValidationReport

FORMATS = ("text", "json", "junit", "sarif", "github")

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
SARIF_LEVEL = {"violation": "error", "warning": "warning", "info": "note"}
GITHUB_COMMAND = {"violation": "error", "warning": "warning", "info": "notice"}


def render(report: ValidationReport, format_name: str, strict: bool = False) -> str:
    """The report in one of FORMATS. ``strict`` makes warnings failures where a format has failures."""
    renderers: dict[str, Callable[[ValidationReport, bool], str]] = {
        "text": render_text,
        "json": render_json,
        "junit": render_junit,
        "sarif": render_sarif,
        "github": render_github,
    }
    return renderers[format_name](report, strict)


def finding_line(finding: Finding) -> str:
    """``data/practices/SOTA-049.yaml:3: [rule-id] severity: message (SOTA-049)``."""
    who = f" ({finding.record})" if finding.record else ""
    # A file name or a quoted value may hold any character: none reaches a terminal as it is.
    return printable(f"{finding.location()}: [{finding.rule_id}] {finding.severity}: {finding.message}{who}")


#: The groups of a report against a baseline, in the order the text shows them.
STATE_HEADINGS = (
    ("new", "New findings (not in {baseline}):"),
    ("unchanged", "Already in {baseline}:"),
    ("absent", "Fixed by this change (in {baseline}, gone now):"),
)


def _file_groups(findings: list[Finding]) -> list[str]:
    lines: list[str] = []
    previous: object = object()
    for finding in findings:
        if finding.file != previous and lines:
            lines.append("")
        previous = finding.file
        lines.append(finding_line(finding))
    return lines


def render_text(report: ValidationReport, strict: bool = False) -> str:
    """Findings grouped by file (a blank line between files), then the summary line; against a
    baseline, in three groups under headings: new first, then unchanged, then fixed."""
    lines: list[str] = []
    if report.baseline is None:
        lines = _file_groups(report.findings)
    else:
        for state, heading in STATE_HEADINGS:
            group = report.absent if state == "absent" else [f for f in report.findings if f.state == state]
            if group:
                lines += [heading.format(baseline=report.baseline), *_file_groups(group), ""]
        lines = lines[:-1] if lines else lines
    if lines:
        lines.append("")
    lines.append(report.summary())
    return "\n".join(lines) + "\n"


def finding_dict(finding: Finding) -> dict[str, Any]:
    return {
        "rule": finding.rule_id,
        "severity": finding.severity,
        "record": finding.record,
        "file": finding.file,
        "line": finding.line,
        "message": finding.message,
        "focus": finding.focus,
        "path": finding.path,
        "value": finding.value,
        **({"state": finding.state} if finding.state is not None else {}),
    }


def render_json(report: ValidationReport, strict: bool = False) -> str:
    document = {
        "conforms": report.conforms,
        "failed": report.failed(strict),
        "engine": report.engine,
        "records": report.records,
        "readable": report.readable,
        "counts": dict(report.counts),
        "findings": [finding_dict(f) for f in report.findings],
    }
    if report.baseline is not None:
        document["baseline"] = report.baseline
        document["states"] = report.state_counts()
        document["absent"] = [finding_dict(f) for f in report.absent]
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


# ------------------------------------------------------------------------------------ JUnit


def _rules_with_findings(report: ValidationReport) -> list[tuple[Rule | None, str, list[Finding]]]:
    """Every rule in rule order with its findings, then rules the findings name that no shape declares."""
    by_rule: dict[str, list[Finding]] = {}
    for finding in report.findings:
        by_rule.setdefault(finding.rule_id, []).append(finding)
    for finding in report.absent:  # listed so their SARIF results have a rule; they never fail
        by_rule.setdefault(finding.rule_id, [])
    rows: list[tuple[Rule | None, str, list[Finding]]] = [
        (rule, rule.id, by_rule.pop(rule.id, [])) for rule in report.rules
    ]
    rows += [(None, rule_id, findings) for rule_id, findings in sorted(by_rule.items())]
    return rows


def render_junit(report: ValidationReport, strict: bool = False) -> str:
    """One test case per rule: a failure lists the rule's violations (and warnings with ``strict``);
    findings that do not fail are printed in the test case's system-out."""
    import xml.etree.ElementTree as ET

    failing = {"violation", "warning"} if strict else {"violation"}
    rows = _rules_with_findings(report)

    def fails(finding: Finding) -> bool:
        return finding.severity in failing and finding.state in (None, "new")

    # a rule whose findings are all in the baseline passes: the counts say what the failure elements say
    failures = sum(1 for _rule, _id, findings in rows if any(map(fails, findings)))
    counts = {"tests": str(len(rows)), "failures": str(failures), "errors": "0"}
    suites = ET.Element("testsuites", {"name": "sotakg validate", **counts})
    suite = ET.SubElement(suites, "testsuite", {"name": "sotakg.filing-rules", **counts, "skipped": "0"})
    for rule, rule_id, findings in rows:
        case = ET.SubElement(suite, "testcase", {"classname": "sotakg.filing-rules", "name": rule_id})
        failed: list[Finding] = []
        passed: list[Finding] = []
        for finding in findings:  # one pass: a membership test per finding was quadratic in a rule's findings
            (failed if fails(finding) else passed).append(finding)
        if failed:
            noun = "finding" if len(failed) == 1 else "findings"
            summary = f"{len(failed)} {noun}: {rule.comment if rule else rule_id}"
            failure = ET.SubElement(case, "failure", {"type": failed[0].severity, "message": summary})
            failure.text = "\n".join(finding_line(f) for f in failed)
        if passed:
            ET.SubElement(case, "system-out").text = "\n".join(finding_line(f) for f in passed)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


# ------------------------------------------------------------------------------------ SARIF


def _artifact_location(file: str) -> dict[str, str]:
    """SARIF's location of ``file``: a URI reference, so the path is percent-encoded (a file named
    ``%2e%2e%2fREADME.md#x.yaml`` would otherwise be read as another file)."""
    path = Path(file)
    if path.is_absolute():
        return {"uri": path.as_uri()}
    relative = str(PurePosixPath(*path.parts))
    return {"uri": urllib.parse.quote(relative, safe="/", errors="surrogateescape"), "uriBaseId": "%SRCROOT%"}


def render_sarif(report: ValidationReport, strict: bool = False) -> str:
    """A SARIF 2.1.0 log: one run, the rules as reporting descriptors, one result per finding."""
    rows = _rules_with_findings(report)
    descriptors: list[dict[str, Any]] = []
    index_of: dict[str, int] = {}
    for rule, rule_id, _findings in rows:
        index_of[rule_id] = len(descriptors)
        descriptor: dict[str, Any] = {"id": rule_id}
        if rule is not None:
            descriptor.update(
                {
                    "shortDescription": {"text": rule.comment or rule_id},
                    "help": {"text": rule.message or rule.comment or rule_id},
                    "defaultConfiguration": {"level": SARIF_LEVEL[rule.severity]},
                    "properties": {"source": rule.source, "tags": ["sotakg", rule.severity]},
                }
            )
        descriptors.append(descriptor)
    results = []
    for finding in [*report.findings, *report.absent]:
        result: dict[str, Any] = {
            "ruleId": finding.rule_id,
            "ruleIndex": index_of[finding.rule_id],
            "level": SARIF_LEVEL.get(finding.severity, "error"),
            "message": {"text": finding.message + (f" ({finding.record})" if finding.record else "")},
        }
        location: dict[str, Any] = {}
        if finding.file is not None:
            physical: dict[str, Any] = {"artifactLocation": _artifact_location(finding.file)}
            if finding.line is not None:
                physical["region"] = {"startLine": finding.line}
            location["physicalLocation"] = physical
        if finding.record is not None:
            location["logicalLocations"] = [{"name": finding.record, "kind": "object"}]
        if location:
            result["locations"] = [location]
        extra = {k: getattr(finding, k) for k in ("focus", "path", "value") if getattr(finding, k) is not None}
        if extra:
            result["properties"] = extra
        if finding.state is not None:
            result["baselineState"] = finding.state
        results.append(result)
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "sotakg", "version": __version__, "rules": descriptors}},
                "invocations": [{"executionSuccessful": True, "exitCode": 1 if report.failed(strict) else 0}],
                "columnKind": "unicodeCodePoints",
                "results": results,
                "properties": {
                    "engine": report.engine,
                    "records": report.records,
                    "counts": dict(report.counts),
                },
            }
        ],
    }
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"


# ------------------------------------------------------------------------------------ GitHub


def _escape_data(text: str) -> str:
    # GitHub's own escapes first, then every other control character made visible, as the text
    # format does: a file name or message must not colour or rewrite the CI log.
    return printable(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_command(finding: Finding) -> str:
    """``::error file=…,line=…,title=rule-id::message (record)``, escaped as GitHub requires."""
    properties = []
    if finding.file is not None:
        properties.append(f"file={_escape_property(finding.file)}")
        if finding.line is not None:
            properties.append(f"line={finding.line}")
    properties.append(f"title={_escape_property(finding.rule_id)}")
    who = f" ({finding.record})" if finding.record else ""
    where = "" if finding.file is not None else f"{finding.location()}: "
    command = GITHUB_COMMAND.get(finding.severity, "error")
    return f"::{command} {','.join(properties)}::{_escape_data(where + finding.message + who)}"


def render_github(report: ValidationReport, strict: bool = False) -> str:
    """One workflow command per finding (annotations on the pull request), then the summary line;
    against a baseline, only the new findings are annotated."""
    lines = [github_command(f) for f in report.findings if f.state in (None, "new")]
    lines.append(report.summary())
    return "\n".join(lines) + "\n"
