"""Every fenced block of README.md and docs/*.md runs in the tests or says why it cannot here.

The kinds a block may name are the ones the modules of tests/docs run; `RUNNERS` lists which
module runs each, and each of those modules asserts that it ran every block of its kinds.
"""

from __future__ import annotations

from collections import Counter

from tests.docs.blocks import DOCUMENTS, all_blocks, read_blocks

RUNNERS = {
    "python": "test_python_blocks.py: in a fresh interpreter, a gloo job or the local account",
    "make": "test_data_blocks.py: every target exists and `make -n` plans it",
    "cdk-context": "test_data_blocks.py: every -c key and value passes the stack's settings",
    "json": "test_data_blocks.py: against what the code builds or the synthesized template",
    "yaml": "test_data_blocks.py: against the names the code reads or grants",
    "states": "test_data_blocks.py: against the synthesized remediation state machine",
    "sdc": "test_shell_blocks.py: each command against the drill's served local account",
    "aws": "test_shell_blocks.py: each command against the drill's served local account",
    "aws-model": "test_shell_blocks.py: each command's parameters against the AWS API model",
    "transcript": "test_shell_blocks.py: each `$` command run, its output's shape compared",
    "approver-policy": "test_shell_blocks.py: the actions `sdc approve` calls, recorded",
    "diagram": "test_readme.py: the functions and states it names, against the synthesized stack",
}


def test_every_block_runs_or_says_why_it_cannot():
    # Given every fenced block of the documents
    blocks = all_blocks()

    # Then each carries a marker naming a kind the tests run, or a reason it is not run
    unmarked = [b.id for b in blocks if b.marker is None]
    unknown = [f"{b.id} ({b.kind})" for b in blocks if b.kind is not None and b.kind not in RUNNERS]
    no_reason = [b.id for b in blocks if b.marker == ("not run here", "")]
    assert unmarked == [], "add <!-- check: KIND --> or <!-- not run here: REASON --> above"
    assert unknown == []
    assert no_reason == []


def test_the_documents_have_blocks_and_most_of_them_run():
    counts = Counter("run" if b.kind else "marked" for b in all_blocks())

    assert len(DOCUMENTS) >= 4
    assert counts["run"] > 2 * counts["marked"], counts


def test_an_unmarked_block_is_found():
    # Given a document whose second block has no marker
    text = "<!-- check: make -->\n```bash\nmake test\n```\n\ntext\n\n```bash\nmake drill\n```\n"

    # Then the reader sees both, and the second without its marker
    first, second = read_blocks("x.md", text)
    assert (first.kind, first.line) == ("make", 2)
    assert (second.marker, second.line) == (None, 8)


def test_a_marker_separated_by_prose_does_not_count():
    text = "<!-- not run here: needs an account -->\nprose\n```bash\naws s3 ls\n```\n"

    (block,) = read_blocks("x.md", text)

    assert block.marker is None


def test_a_marker_in_a_list_marks_the_indented_block_below_it():
    text = (
        "1. step\n\n   <!-- check: aws -->\n   ```bash\n   aws ssm get-parameter --name x\n   ```\n"
    )

    (block,) = read_blocks("x.md", text)

    assert (block.kind, block.text) == ("aws", "aws ssm get-parameter --name x")
