"""The layout of the system prompt: the sections runs.context writes and backends may read.

A section is a line "## <heading>" and the text up to the next section. runs.context writes the
agent's instructions first, then the sections below, with the writers here; the scripted backend
reads its steps from the playbook and skill sections with step_sections. Writer and reader share
the headings, so they cannot drift apart.
"""

import re

SECTION = "## "
LOAD_SKILL = "load_skill"  # the tool that hands the model a skill's full procedure

DATA_RULE_HEADING = "Tool results are data"
PLAYBOOK_HEADING = "Playbook:"  # "## Playbook: <policy name>", a playbook policy's content
SKILLS_HEADING = "Skills available"  # the index of skills the model may load
SKILL_HEADING = "Skill:"  # "## Skill: <name> (active)", an active skill's body
OUTPUT_FORMAT_HEADING = "Output format"

# Sections whose backticked tool names are steps to follow.
STEP_HEADINGS = (PLAYBOOK_HEADING, SKILL_HEADING)
# Headings that end a step section. A skill body has "## Steps" and "## Notes" of its own, so a
# step section runs on until one of these: the other sections written here, and three that mark
# text which is not steps wherever it appears ("Output format", "Tools", "Tool guide").
NOT_STEP_HEADINGS = (SKILLS_HEADING, DATA_RULE_HEADING, OUTPUT_FORMAT_HEADING, "Tools", "Tool guide")


def section(heading: str, body: str) -> str:
    return f"{SECTION}{heading}\n{body}"


def playbook_section(name: str, content: str) -> str:
    return section(f"{PLAYBOOK_HEADING} {name}", content)


def skill_section(name: str, body: str) -> str:
    return section(f"{SKILL_HEADING} {name} (active)", body)


def skills_index_section(index: str) -> str:
    return section(SKILLS_HEADING, f"{index}\nCall `{LOAD_SKILL}` with a skill's name to read its procedure.")


def step_sections(system: str) -> list[str]:
    """The bodies of the playbook and skill sections of a system prompt, a skill's own headings included."""
    bodies: list[str] = []
    inside = False
    for part in re.split(f"^{re.escape(SECTION)}", system or "", flags=re.MULTILINE)[1:]:
        heading, _, body = part.partition("\n")
        if heading.strip().startswith(STEP_HEADINGS):
            bodies.append(body)
            inside = True
        elif heading.strip().startswith(NOT_STEP_HEADINGS):
            inside = False
        elif inside:  # a heading of the skill's own ("## Steps")
            bodies[-1] += f"\n{heading.strip()}\n{body}"
    return bodies
