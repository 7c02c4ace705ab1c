"""The rule table of a chapter (chapters/<pack>/tests/rules.toml, rendered to RULES.md by harness.staff.rules): every
row names a test that exists and its distinguishing input (or says why the rule is free, or where else it is
graded), no id repeats, cited golden cases exist and are read by the named test, and RULES.md is current."""

from dataclasses import replace

import pytest

from harness.registry import load_chapter
from harness.staff.rules import domain_problems, load_domains, load_rules, markdown_path, problems, render_markdown, rules_path

CH = load_chapter("L10.8")


def test_the_rule_table_is_well_formed():
    rules = load_rules(CH)
    assert len(rules) >= 60, f"{rules_path(CH)} holds {len(rules)} rules"
    assert problems(CH, rules) == []


def test_rules_md_is_rendered_from_the_table():
    assert markdown_path(CH).read_text() == render_markdown(CH, load_rules(CH)), (
        f"{markdown_path(CH)} is stale: run python -m harness.staff.rules {CH.chapter}")


@pytest.mark.parametrize("break_it, complaint", [
    (lambda r: replace(r, test="greedy_spec_equals_greedy_without_specs"), "which is not a test of L10.8"),
    (lambda r: replace(r, input=""), "needs its distinguishing input"),
    (lambda r: replace(r, id="R-PL-3"), "a rule id is R-"),
    (lambda r: replace(r, free="the contract says nothing"), "exactly one of test (with input), free or elsewhere"),
    (lambda r: replace(r, golden=("v999",)), "is not in spec_golden.json"),
    (lambda r: replace(r, golden=("pl000",)), "which greedy_spec_equals_greedy_without_spec does not read"),
], ids=["unknown test", "no input", "bad id", "two kinds", "unknown golden case", "golden case the test does not read"])
def test_a_broken_row_is_named(break_it, complaint):
    rules = load_rules(CH)
    i = next(i for i, r in enumerate(rules) if r.test == "greedy_spec_equals_greedy_without_spec")
    rules[i] = break_it(rules[i])
    found = problems(CH, rules)
    assert any(complaint in p for p in found), found


def test_a_repeated_id_and_an_untested_test_are_named():
    rules = load_rules(CH)
    found = problems(CH, rules + [rules[0]])
    assert any(f"{rules[0].id}: the id repeats" in p for p in found), found
    only = [r for r in rules if r.test != "rollback_drops_one_reference_only"]
    assert any("rollback_drops_one_reference_only is named by no rule" in p for p in problems(CH, only))


def test_a_free_row_needs_no_input_but_its_reason():
    rules = load_rules(CH)
    free = next(r for r in rules if r.kind == "free")
    assert problems(CH, [replace(free, free="")] + [r for r in rules if r is not free]) != []
    assert problems(CH, [replace(free, input="an input")] + [r for r in rules if r is not free]) != []


CONTRACT_FUNCTIONS = ("SpecConfig.parse", "prompt_lookup", "ngram_draft", "propose", "residual", "sample_dense",
                      "speculative_step", "dense_distribution", "verify_draft", "blocks_for", "rollback", "generate_stream")


def test_every_contract_function_has_a_domain():
    domains = load_domains(CH)
    assert domain_problems(CH, domains, CONTRACT_FUNCTIONS) == []


@pytest.mark.parametrize("break_it, complaint", [
    (lambda d: replace(d, test="no_such_test"), "which is not a test of L10.8"),
    (lambda d: replace(d, refuses=""), "says nothing under 'refuses'"),
    (lambda d: replace(d, function="prompt_lookup"), "the function has two rows"),
], ids=["unknown test", "empty refuses", "repeated function"])
def test_a_broken_domain_row_is_named(break_it, complaint):
    domains = load_domains(CH)
    i = next(i for i, d in enumerate(domains) if d.function == "ngram_draft")
    domains[i] = break_it(domains[i])
    found = domain_problems(CH, domains, CONTRACT_FUNCTIONS)
    assert any(complaint in p for p in found), found


def test_a_contract_function_without_a_domain_is_named():
    domains = [d for d in load_domains(CH) if d.function != "blocks_for"]
    assert "the contract function blocks_for has no domain row" in domain_problems(CH, domains, CONTRACT_FUNCTIONS)
