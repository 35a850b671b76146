"""The layout of the system prompt: the section headings runs.context writes and backends may read.

A section is a line "## <heading>" and the text up to the next section. runs.context writes the
agent's instructions first, then the sections below; the scripted backend reads its steps from the
playbook and skill sections. Both take the headings from here, so they cannot drift apart.
"""

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
